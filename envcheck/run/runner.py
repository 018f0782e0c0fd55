"""``envcheck run`` as a library call: options in, ``Report`` out, nothing printed."""

import dataclasses
import datetime
import os
import time

from .. import __version__
from ..core import limits, mesh as mesh_mod, options as run_options, plan as plan_mod, \
    repeat as repeat_mod
from ..probes import catalog
from ..core.errors import UsageError
from ..core import host, outcomes
from ..preinstall import discovery, nvidia_smi
from ..report.model import Report
from . import follow_up, interpreter, merge
from .supervisor import supervise

BACKENDS = plan_mod.BACKENDS
DEFAULT_TIMEOUT = plan_mod.DEFAULT_TIMEOUT
MAX_NPROC = 1024


@dataclasses.dataclass
class RunOptions:
    nproc: int = None  # None: one rank per local GPU, else 2
    backend: str = "auto"
    probes: tuple = ()
    skip: tuple = ()
    timeout: float = DEFAULT_TIMEOUT
    python: str = None
    probe_paths: tuple = ()
    model: str = None
    master_port: int = None  # None: a free port
    startup_timeout: float = None
    frameworks: tuple = ()  # --framework: keys of core.frameworks.FRAMEWORKS
    min_busbw: str = None  # GB/s, as given: checked by plan_mod.min_busbw
    repeat: str = None  # --repeat N, as given: checked by core.repeat
    duration: str = None  # --for DURATION, as given
    mesh: str = None  # --mesh NAME=N,...: the job's layout (core/mesh.py)
    mesh_config: str = None  # --mesh-config FILE
    mesh_order: str = None  # --mesh-order NAME,...


@dataclasses.dataclass
class Plan:
    nproc: int
    backend: str
    probes: list  # probes/spec.Probe, in the order they run
    timeout: float
    interpreter: interpreter.Interpreter
    options: dict
    notes: list
    master_port: int = None
    startup_timeout: float = None
    gpus: int = 0  # GPUs nvidia-smi shows: an NCCL run has at most one rank per GPU
    # A limit of this host that leaves no room to start the ranks (core/limits.py): the
    # report says so, as the setup check it is, and no rank is started.
    no_room: dict = None

    def follow_ups(self):
        """The phases at other world sizes the chosen probes declare (core.plan)."""
        nccl = self.gpus and self.backend != "gloo"
        return plan_mod.follow_ups(self.probes, self.nproc,
                                   max_ranks=self.gpus if nccl else None)

    def to_dict(self):
        return {"nproc": self.nproc, "backend": self.backend,
                "probes": [p.name for p in self.probes], "timeout": self.timeout,
                "startup_timeout": self.startup_timeout,
                "python": self.interpreter.path,
                "python_version": self.interpreter.python_version,
                "options": self.options, "notes": self.notes,
                "follow_ups": [{k: p[k] for k in ("probe", "check", "world_size", "skip")}
                               for p in self.follow_ups()]}


def make_plan(opts):
    """Validate everything the user gave before a single rank starts."""
    run_options.backend(opts.backend)
    if opts.nproc is not None and opts.nproc < 1:
        raise UsageError("--nproc %d: need at least 1 rank" % opts.nproc)
    if opts.nproc is not None and opts.nproc > MAX_NPROC:
        raise UsageError("--nproc %d: at most %d ranks on one machine (each is a Python "
                         "process importing torch)" % (opts.nproc, MAX_NPROC))
    if opts.master_port is not None and not 1 <= opts.master_port <= 65535:
        raise UsageError("--master-port %d: not a TCP port (1-65535)" % opts.master_port)
    run_options.timeouts(timeout=opts.timeout, startup_timeout=opts.startup_timeout)
    notes = []
    try:
        gpus = discovery.discover().gpus  # NVML, else nvidia-smi (R470 included)
    except nvidia_smi.NvidiaSmiError as exc:
        gpus = []
        notes.append("%s; counting 0 GPUs" % exc)
    if opts.backend == "nccl" and not gpus:
        raise UsageError("--backend nccl needs NVIDIA GPUs, and nvidia-smi shows none here; "
                         "use --backend gloo (or auto)")
    shown = discovery.visible(len(gpus), os.environ)
    if gpus and shown < len(gpus):
        notes.append("CUDA_VISIBLE_DEVICES=%s: the ranks see %d of this node's %d GPUs"
                     % (os.environ.get("CUDA_VISIBLE_DEVICES"), shown, len(gpus)))
    if opts.backend == "nccl" and not shown:
        raise UsageError("--backend nccl needs a GPU, and CUDA_VISIBLE_DEVICES=%s hides "
                         "all %d here; use --backend gloo (or auto)"
                         % (os.environ.get("CUDA_VISIBLE_DEVICES"), len(gpus)))
    if opts.backend == "nccl" and opts.nproc and opts.nproc > shown:
        # NCCL refuses two ranks on one GPU ("Duplicate GPU detected"), and a rank whose
        # LOCAL_RANK has no GPU fails with "invalid device ordinal": never a finding.
        raise UsageError("--backend nccl --nproc %d: NCCL needs a GPU per rank, and %d %s "
                         "visible here; use --nproc %d, or --backend gloo for more ranks "
                         "on CPU" % (opts.nproc, shown, "is" if shown == 1 else "are",
                                     shown))
    nproc = opts.nproc or (shown if shown else 2)
    outcome, detail, advice, data = limits.processes(nproc, host.host_name(), started=False)
    no_room = None
    if outcome == "failed":
        no_room = {"check": "processes", "detail": detail, "advice": advice, "data": data}
    outcome, detail, advice, data = limits.open_files(
        nproc, nproc, "nccl" if opts.backend == "nccl" else "gloo", host.host_name())
    if outcome == "failed" and limits.too_few_to_start():
        # the ranks could not even start to say it themselves (their setup.open_files)
        no_room = {"check": "open_files", "detail": detail, "advice": advice, "data": data}
    outcome, detail, advice, data = limits.tmpdir(os.environ, host.host_name(), nproc)
    if outcome == "failed" and data["usable"] is None:
        # nowhere to put the run's directory: the ranks cannot start to say it themselves
        no_room = {"check": "tmpdir", "detail": detail, "advice": advice, "data": data}
    from ..core.frameworks import FRAMEWORKS

    for name in opts.frameworks:
        if name not in FRAMEWORKS:
            raise UsageError("--framework %r: choose from %s" % (name, ", ".join(FRAMEWORKS)))
    wanted = opts.probes
    if opts.frameworks and wanted and "frameworks" not in wanted:
        wanted = tuple(wanted) + ("frameworks",)  # asked for by name: its probe runs
    known = catalog.all_probes(opts.probe_paths)
    specs = catalog.select(known, wanted, opts.skip)
    options = {}
    rounds = repeat_mod.option(opts.repeat, opts.duration)
    if rounds:
        options[repeat_mod.OPTION] = rounds
        specs = repeat_mod.with_probe(specs, known)
    if opts.min_busbw is not None:
        options["min_busbw"] = plan_mod.min_busbw(opts.min_busbw)
    layout = mesh_mod.read(opts.mesh, opts.mesh_config, opts.mesh_order, nproc)
    if layout is not None:
        options["mesh"] = layout.to_dict()
        specs = mesh_mod.with_probe(specs, known, opts.skip)
    if opts.frameworks:
        options["frameworks"] = sorted(set(opts.frameworks))
    if opts.model:
        from .model_spec import check_model_found, check_model_spec
        options["model"] = check_model_spec(opts.model)
        check_model_found(options["model"], own_python=opts.python is None)
    interp = interpreter.resolve(opts.python)
    startup = float(opts.startup_timeout or plan_mod.startup_timeout(float(opts.timeout)))
    return Plan(nproc, opts.backend, specs, float(opts.timeout), interp, options, notes,
                opts.master_port, startup, gpus=shown, no_room=no_room)


def _no_room_report(plan, created):
    """The report of a run whose ranks this host's limits leave no room to start: the
    setup check that says so, and every check of the plan not run."""
    from ..report.model import CheckResult

    room = plan.no_room
    checks, env, ranks = merge.results([], [p.name for p in plan.probes], plan.nproc,
                                       plan.timeout)
    why = "not run: %s" % room["detail"].split(";")[0]
    for c in checks:
        c.detail = why
    failed = CheckResult(probe=catalog.SETUP, check=room["check"], outcome="failed",
                         seconds=0.0, detail=room["detail"], advice=room["advice"],
                         ranks={str(r): {"outcome": "failed", "detail": "not started",
                                         "host": host.host_name()} for r in range(plan.nproc)})
    ranks = [{"host": host.host_name(), "pid": None, "local_rank": r, "device": None,
              "backend": plan.backend, "cuda_visible_devices": None, "rank": r}
             for r in range(plan.nproc)]  # never started: where they would have run
    return Report(envcheck_version=__version__, created=created, plan=plan.to_dict(),
                  environment=env, ranks=ranks, checks=[failed] + checks, duration_s=0.0,
                  interrupted=None, attempts=[])


def execute(plan, on_event=None, while_starting=None, head=None):
    started = time.monotonic()
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if plan.no_room:
        return _no_room_report(plan, created)
    rank_plan = plan_mod.rank_plan(plan.backend, plan.timeout,
                                   [p.plan_entry() for p in plan.probes], plan.options)
    # Probes that declare phases at other world sizes (FOLLOW_UPS): run after the main run.
    phases = plan.follow_ups()
    with follow_up.handoff(phases, rank_plan) as rank_plan:
        attempts = supervise(plan.interpreter.path, rank_plan, plan.nproc,
                             on_event=on_event, startup_timeout=plan.startup_timeout,
                             master_port=plan.master_port, notes=plan.notes,
                             while_starting=while_starting, head=head)
        extra_checks, extra_attempts = follow_up.run(
            phases, attempts, plan.interpreter.path, rank_plan, plan.timeout,
            on_event=on_event, startup_timeout=plan.startup_timeout, notes=plan.notes)
    checks, env, ranks = merge.results(attempts, [p.name for p in plan.probes], plan.nproc,
                                       plan.timeout)
    checks = follow_up.place(checks, extra_checks)
    attempts = attempts + extra_attempts
    torn = sum(a.torn for a in attempts)
    if torn:
        plan.notes.append(merge.torn_note(torn))
    last = attempts[-1].abort if attempts else None
    interrupted = None
    if last and last.kind == "interrupted":
        interrupted = merge.abort_signal(last)
    return Report(envcheck_version=__version__, created=created, plan=plan.to_dict(),
                  environment=env, ranks=ranks, checks=checks,
                  duration_s=round(time.monotonic() - started, 3), interrupted=interrupted,
                  attempts=merge.attempts_summary(attempts))


def exit_code(report, strict=False):
    """0 when nothing unexpected, 1 otherwise; 130/143 when interrupted."""
    return outcomes.exit_code(report.checks, report.interrupted, strict)
