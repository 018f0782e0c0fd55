"""A rank started by torchrun or srun: the probes run across nodes, with no envcheck supervisor.

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
        --rdzv-endpoint HOST:29500 -m envcheck.worker.launched --out DIR --json report.json
    srun --ntasks-per-node 8 python -m envcheck.worker.launched --out DIR --json report.json

(see docs/multinode.md). Each rank finds out who it is from the launcher's environment —
torchrun's RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE, or srun's SLURM_PROCID /
SLURM_LOCALID / SLURM_NTASKS / SLURM_STEP_TASKS_PER_NODE, with MASTER_ADDR and
MASTER_PORT exported by the user — then runs the same ``runtime`` as a rank that
``envcheck run`` starts: start, setup, run_probes, teardown, writing its record stream to
``DIR/records-rank{RANK}.jsonl``.

What the supervisor does for ``envcheck run`` happens here instead:

- **Timeouts.** This process forks the rank and stays beside it as its watcher
  (``watcher.py``): a process, so that a rank stuck in C++ holding the GIL is still timed
  out, its stacks kept (SIGUSR1), a ``hang`` record written, and the rank killed (exit
  124), so that the launcher tears the job down. Under torchrun, with several ranks on a
  host, the host's zygote forks the rank instead (``hostzygote.py``: one import of torch
  for every local rank), and this process watches it all the same.
- **One report.** After the last probe, rank 0 gathers every rank's records and has
  envcheck's CLI judge them (``reporting.py``). When the job fails instead, every rank's
  records reach rank 0 through the launcher's store (``relay.py``): each host's local
  rank 0 sends its host's records there as they are written, and each rank's watcher
  sends that rank's last words, once.

Who the rank is comes from ``identity.py``.

Records this mode adds to ``records.py``'s: ``launch`` (every rank, first: launcher,
world size, the plan), ``gather_start`` / ``report_start`` (after ``bye``) and ``hang``
(the watcher: phase, check, waited_s, timeout, in_collective, stopped, and killed_at:
when it killed the rank).
"""

import argparse
import faulthandler
import os
import platform
import signal
import sys
import time

from ..core import mesh as mesh_mod, options, plan as plan_mod, repeat as repeat_mod
from ..probes import catalog
from ..core.atomic import write_atomic
from ..core.errors import UsageError
from ..core.outcomes import RankExit
from ..core.records import MERGED_RECORDS, records_path, stacks_path
from ..core.text import printable
from ..launch import enclosure, procs
from ..launch.watchdog import grace_for
from . import hostzygote, identity, relay, reporting, runtime, watcher as watcher_mod
from ..probes.shared.files import SHARED_DIR_ENV


def plan_entries(wanted, skipped, probe_paths, rounds=None, mesh=False):
    """The probes to run, as plan entries: the same catalog and order as envcheck run
    (``rounds``: --repeat or --for asked for the repeat probe; ``mesh``: a layout, the
    mesh probe)."""
    known = catalog.all_probes(probe_paths)
    specs = catalog.select(known, wanted, skipped)
    if rounds:
        specs = repeat_mod.with_probe(specs, known)
    if mesh:
        specs = mesh_mod.with_probe(specs, known, skipped)
    return [spec.plan_entry() for spec in specs]


def _check_writable(path):
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(directory) \
            or not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError("cannot write %s" % path)


def _check_checkpoint_dir(path):
    if not os.path.isdir(path):
        raise UsageError("--checkpoint-dir %s: no such directory on %s" % (
            path, runtime.host_name()))
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError("--checkpoint-dir %s: not writable on %s" % (
            path, runtime.host_name()))


def parser():
    """launcher mode's command line: its own options, and those it shares with envcheck
    run (core/options.py)."""
    p = argparse.ArgumentParser(
        prog="python -m envcheck.worker.launched",
        description="One rank of an envcheck run started by torchrun or srun.")
    p.add_argument("--out", default="envcheck-out", metavar="DIR",
                   help="per-rank records and stacks, and rank 0's records.jsonl; a "
                        "directory every node can write, fresh per job [%(default)s]")
    p.add_argument("--format", default="table", choices=("table", "json", "markdown"),
                   help="what rank 0 prints [%(default)s]")
    # The options envcheck run has too, declared once (core/options.py); rank 0 writes
    # the reports, and --timeout also bounds setup and the final gather.
    for option in options.SHARED:
        p.add_argument(*option.flags, **option.argparse_kwargs)
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="where the DCP checks write their checkpoints: a directory every "
                        "host mounts, as training's checkpoints need [$%s, else DCP across "
                        "hosts is not tested]" % SHARED_DIR_ENV)
    return p


def parse_args(argv):
    p = parser()
    args = p.parse_args(argv)
    try:  # the same checks, and words, as envcheck run's
        options.backend(args.backend)
        options.timeouts(timeout=args.timeout, startup_timeout=args.startup_timeout)
    except UsageError as exc:
        p.error(str(exc))
    return args


class Job:
    """One rank of this launched job, as its watcher and its rank both see it."""

    def __init__(self, args, launcher, who, entries):
        self.args = args
        self.launcher = launcher
        self.rank, self.local_rank, self.world_size, self.local_world_size = who
        self.identity = who
        self.out = args.out
        self.timeout = args.timeout
        self.startup_timeout = (args.startup_timeout
                                or plan_mod.startup_timeout(args.timeout))
        self.plan = plan_mod.rank_plan(args.backend, args.timeout, entries,
                                       args.probe_options)
        self.run_id = identity.run_id(os.environ)
        # When this rank's process started its work (the report's duration counts from
        # it): in a rank the host's zygote forked, its watcher's (run_forked).
        self.started = time.time()
        self.started_mono = time.monotonic()  # the watcher's startup clock starts here
        self.host = runtime.host_name()
        # How long rank 0 waits, after its own bad end, for the other ranks' last words:
        # they meet their own deadline at about the same time, plus a grace.
        self.collect_wait = grace_for(args.timeout) + 5.0

    @property
    def one_host(self):
        """Every rank on this host: their files are all here, no store needed."""
        return self.local_world_size == self.world_size

    def relay(self, collect):
        return [] if self.one_host else watcher_mod.run_relay(self, collect)

    def report_after_failure(self, collected, silent, code):
        """Rank 0 after a bad end: the report of every rank the store reached, or of
        this host's ranks where it was out of reach. Never exits 0: the job failed."""
        if self.one_host:
            source = os.path.abspath(self.out)
        elif silent is None:
            source = os.path.abspath(self.out)
            print("envcheck: rank 0 on %s: the job's store is out of reach, so only this "
                  "host's ranks are in the report; with every host's --out directory "
                  "copied into one: envcheck report --records DIR" % printable(self.host),
                  file=sys.stderr)
        else:
            source = collected
            reporting.prefer_local(self.out, collected)
            if silent:
                print("envcheck: %s sent no last word within %.0f s (the host died, or "
                      "its link is down): the report shows what they sent before" % (
                          printable(reporting.ranks_on_hosts(collected, silent)),
                          self.collect_wait),
                      file=sys.stderr)
        reported = reporting.render_report(self.args, source)
        return reported if reported not in (None, RankExit.OK) else (code or 1)


def _rank_main(job, forked=None):
    """The rank itself (forked by the watcher): start, setup, probes, teardown, gather."""
    args, rank = job.args, job.rank
    # Ranks the launcher tears down leave their stacks: where they were waiting.
    stacks = open(stacks_path(args.out, rank), "a", encoding="utf-8")
    faulthandler.register(signal.SIGTERM, file=stacks, all_threads=True, chain=True)
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    t0 = job.started
    publisher = []

    def watched(writer):
        writer.write("launch", launcher=job.launcher, run_id=job.run_id,
                     world_size=job.world_size, local_world_size=job.local_world_size,
                     plan=plan_mod.summary(job.plan), python=sys.executable,
                     python_version=platform.python_version(),
                     master_port=os.environ.get("MASTER_PORT"), started=t0)
        if job.local_rank == 0:  # one publisher per host, for every local rank
            pub = relay.Publisher(job.run_id, rank, job.world_size, args.out,
                                  relay.hosts_store(os.environ, rank), job.timeout,
                                  local=(job.local_rank, job.local_world_size))
            pub.start()
            publisher.append(pub)
        return writer

    def flush():
        # A rank that ends here (its setup failed) sends its host's last lines itself,
        # before it exits: else they wait for its watcher's relay, a new process that
        # must import torch first, and on a busy machine rank 0 may stop waiting first
        for pub in publisher:
            pub.flush()

    report = reporting.start_report(args) if rank == 0 else None
    ctx = runtime.run_rank(job.plan, args.out, job.identity, wrap=watched, forked=forked,
                           before_exit=flush)
    records = ctx.records
    records.write("gather_start")
    chunks = reporting.gather_records(ctx, records_path(args.out, rank))
    code = 0
    if rank != 0 and job.local_rank == 0:
        # An agent without rank 0 says what its ranks did, and where the report is.
        print(reporting.agent_line(args, job.identity, ctx.host, len(job.plan.get("probes") or ())),
              flush=True)
    if rank == 0:
        merged = os.path.join(os.path.abspath(args.out), MERGED_RECORDS)
        write_atomic(merged, b"".join(c if c.endswith(b"\n") or not c else c + b"\n"
                                       for c in chunks))
        records.write("report_start")
        code = reporting.render_report(args, merged, report)
        if code is None:
            code = reporting.unjudged(merged, chunks)
    flush()
    runtime.finish(records, code)


def prepare(argv):
    """The Job this process's arguments and launcher's environment describe; raises
    UsageError (or OSError: --out cannot be made) on bad input."""
    args = parse_args(argv)
    launcher = identity.export_identity(os.environ)
    rounds = repeat_mod.option(args.repeat, args.duration)
    entries = plan_entries(args.probe, args.skip, args.probe_path, rounds)
    who = identity.read_identity()
    os.makedirs(args.out, exist_ok=True)  # first: --json may be a file in --out
    if who[0] == 0:
        for path in (args.json_path, args.junit_path):
            if path:
                _check_writable(path)
    args.probe_options = {}
    if args.min_busbw is not None:
        args.probe_options["min_busbw"] = plan_mod.min_busbw(args.min_busbw)
    if rounds:
        args.probe_options[repeat_mod.OPTION] = rounds
    layout = mesh_mod.read(args.mesh, args.mesh_config, args.mesh_order, who[2])
    if layout is not None:
        args.probe_options["mesh"] = layout.to_dict()
        entries = plan_entries(args.probe, args.skip, args.probe_path, rounds, mesh=True)
    if args.checkpoint_dir:
        _check_checkpoint_dir(args.checkpoint_dir)
        os.environ[SHARED_DIR_ENV] = args.checkpoint_dir
    return Job(args, launcher, who, entries)


# What the host's zygote runs in the rank it forks for this process (``run_forked``).
RANK_TARGET = hostzygote.RANK_TARGET


def run_forked(argv, started, forked=None):
    """A rank the host's zygote forked (``hostzygote.py``) for the watcher that sent
    ``argv`` and its environment, and started its work at ``started``: the same job,
    rebuilt from them (``forked``: the zygote's pid and import time). Never returns."""
    try:
        job = prepare(argv)
    except (UsageError, OSError) as exc:  # its watcher's own prepare() passed: a race
        print("envcheck: error: %s" % exc, file=sys.stderr)
        return RankExit.USAGE
    job.started = started
    _rank_main(job, forked)
    return 1


def _start_rank(job, argv, pen):
    """Fork the rank, or have the host's zygote fork it (one import of torch for every
    local rank under torchrun), in its enclosure ``pen``: its pid, the zygote's Fork or
    None, and the zygote's pid where this process started it (None)."""
    zygote = None
    if hostzygote.wanted(job.launcher, job.local_world_size):
        if job.local_rank == 0:
            zygote = hostzygote.start(job.plan["probes"], job.local_world_size,
                                      job.startup_timeout)
        fork = hostzygote.ask(RANK_TARGET, argv, job.started, job.startup_timeout,
                              environ=pen.environ(os.environ), cgroup=pen.path)
        if fork is not None:
            return fork.pid, fork, zygote
        # Refused, or no fork within the startup timeout (the zygote's import stalled):
        # this rank imports torch itself, with a startup timeout of its own.
        job.started_mono = time.monotonic()
    return watcher_mod.fork_rank(lambda: _rank_main(job), pen), None, zygote


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        job = prepare(argv)
    except (UsageError, OSError) as exc:
        print("envcheck: error: %s" % exc, file=sys.stderr)
        sys.exit(RankExit.USAGE)
    for stale in (records_path(job.out, job.rank), stacks_path(job.out, job.rank)):
        try:
            os.remove(stale)  # a previous job's, in a reused --out
        except FileNotFoundError:
            pass
    # What the rank starts is kept in, and ends with it (launch/enclosure.py).
    pen = enclosure.Enclosure(job.run_id, job.rank)
    pid, fork, zygote = _start_rank(job, argv, pen)
    sys.exit(watcher_mod.Watcher(pid, job, fork, pen, zygote).run())


if __name__ == "__main__":
    main()
