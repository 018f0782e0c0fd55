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
- **One report.** After the last probe, rank 0 gathers every rank's records through the
  process group (tensors only: all_gather_object needs numpy in some torch builds) and
  writes them, all ranks, to ``DIR/records.jsonl``. When the job fails instead, every
  rank's records reach rank 0 through the launcher's store (``relay.py``): each rank
  sends them there as it writes them, and its watcher sends its last words. This side may
  import only the stdlib and torch, so the report itself is built where envcheck is
  installed: ``envcheck report --records ...``. Rank 0 runs that for you when this
  interpreter (or an ``envcheck`` on PATH) has envcheck's dependencies; its exit code is
  rank 0's. It starts it as it starts itself, so that the helper's imports and the
  matrix are done before the probes end (every other host waits for rank 0 then).

Records this mode adds to ``records.py``'s: ``launch`` (every rank, first: launcher,
world size, the plan), ``gather_start`` / ``report_start`` (after ``bye``) and ``hang``
(the watcher: phase, check, waited_s, timeout, in_collective, stopped).
"""

import argparse
import ctypes
import faulthandler
import os
import platform
import re
import shutil
import signal
import sys
import time

from ..core import catalog, plan as plan_mod, records as records_mod
from ..core.atomic import write_atomic
from ..core.errors import UsageError
from ..core.outcomes import RankExit
from ..core.records import MERGED_RECORDS, records_path, stacks_path
from ..launch import procs
from . import hostzygote, relay, runtime, watcher as watcher_mod
from .probes.checkpoint.files import SHARED_DIR_ENV



def expand_tasks_per_node(value):
    """SLURM's '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for part in value.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise ValueError(value)
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def _slurm_local_world(environ):
    node = int(environ.get("SLURM_NODEID", "0"))
    for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        if environ.get(name):
            counts = expand_tasks_per_node(environ[name])
            if node < len(counts):
                return counts[node]
    if environ.get("SLURM_NTASKS_PER_NODE"):
        return int(environ["SLURM_NTASKS_PER_NODE"])
    return int(environ["SLURM_NTASKS"]) // int(environ.get("SLURM_NNODES", "1"))


def export_identity(environ):
    """Which launcher started this rank; exports torchrun-style names under srun.

    torchrun's variables win when both are present (torchrun inside an srun step: the
    SLURM ids then describe the agent, not the rank). The probes read RANK & co. from
    the environment, so under srun they are exported from the SLURM ids.
    """
    if environ.get("RANK") is not None and environ.get("WORLD_SIZE") is not None:
        launcher = "torchrun" if environ.get("TORCHELASTIC_RUN_ID") else "env"
    elif environ.get("SLURM_PROCID") is not None and environ.get("SLURM_NTASKS"):
        launcher = "slurm"
        try:
            local_world = _slurm_local_world(environ)
        except (ValueError, KeyError) as exc:
            raise UsageError("cannot tell how many tasks run on this node from SLURM's "
                              "variables (%s); set LOCAL_WORLD_SIZE" % exc) from None
        environ["RANK"] = environ["SLURM_PROCID"]
        environ["WORLD_SIZE"] = environ["SLURM_NTASKS"]
        environ["LOCAL_RANK"] = environ.get("SLURM_LOCALID", "0")
        environ["LOCAL_WORLD_SIZE"] = str(local_world)
        environ["GROUP_RANK"] = environ.get("SLURM_NODEID", "0")
    elif any(name.startswith("ACCELERATE_") for name in environ):
        # accelerate launch without --multi_gpu (or --num_processes 1) runs the script
        # once, as a plain process: no RANK, no WORLD_SIZE. On CPU too, --multi_gpu is the
        # flag that makes it start several ranks (accelerate 1.15.0, observed).
        raise UsageError("started by accelerate launch as a single process (ACCELERATE_* "
                         "is set, RANK/WORLD_SIZE are not): add --multi_gpu, which starts "
                         "--num_processes ranks on CPU too: accelerate launch --multi_gpu "
                         "--num_processes 2 -m envcheck.worker.launched ...")
    else:
        raise UsageError("start this with torchrun or srun: neither RANK/WORLD_SIZE nor "
                          "SLURM_PROCID/SLURM_NTASKS is set (on one machine, use "
                          "'envcheck run')")
    missing = [n for n in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(n)]
    if missing:
        raise UsageError(
            "%s not set: under srun, export them before the step, e.g. "
            "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1) "
            "MASTER_PORT=29500" % " and ".join(missing))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        value = environ.get(name)
        if value is not None and not value.strip().isdigit():
            raise UsageError("%s=%r is not a non-negative integer" % (name, value))
    environ["ENVCHECK_LAUNCHER"] = launcher
    return launcher


def run_id(environ):
    """What tells this job's records from a previous job's in the same directory."""
    if environ.get("TORCHELASTIC_RUN_ID") not in (None, "", "none"):
        return "torchrun:%s" % environ["TORCHELASTIC_RUN_ID"]
    if environ.get("SLURM_JOB_ID"):
        return "slurm:%s.%s" % (environ["SLURM_JOB_ID"], environ.get("SLURM_STEP_ID", "0"))
    return "env:%s:%s" % (environ.get("MASTER_ADDR"), environ.get("MASTER_PORT"))


def plan_entries(wanted, skipped, probe_paths):
    """The probes to run, as plan entries: the same catalog and order as envcheck run."""
    specs = catalog.select(catalog.all_probes(probe_paths), wanted, skipped)
    return [spec.plan_entry() for spec in specs]


def _check_writable(path):
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(directory) \
            or not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError("cannot write %s" % path)


def gather_records(ctx, path):
    """Every rank's record file, as bytes, on rank 0 (None elsewhere); tensors only."""
    import torch
    import torch.distributed as dist

    with open(path, "rb") as f:
        data = f.read()
    size = torch.tensor([len(data)], dtype=torch.int64, device=ctx.device)
    sizes = [torch.zeros_like(size) for _ in range(ctx.world_size)]
    dist.all_gather(sizes, size)
    sizes = [int(s.item()) for s in sizes]
    buf = torch.zeros(max(max(sizes), 1), dtype=torch.uint8)
    if data:
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    buf = buf.to(ctx.device)
    if ctx.rank != 0:
        dist.gather(buf, dst=0)
        return None
    out = [torch.empty_like(buf) for _ in range(ctx.world_size)]
    dist.gather(buf, gather_list=out, dst=0)
    result = []
    for t, n in zip(out, sizes):
        t = t.cpu().contiguous()
        result.append(ctypes.string_at(t.data_ptr(), n))  # no numpy needed
    return result


def _failed_checks(chunks):
    """How many checks failed on some rank, from the gathered record streams."""
    failed = set()
    for chunk in chunks:
        records, _ = records_mod.parse(chunk.decode("utf-8", "replace"))
        failed.update((r.get("probe"), r.get("check")) for r in records
                      if r["t"] in ("check", "setup") and r.get("outcome") == "failed")
    return len(failed)


def _missing_dependencies(stderr):
    return "ModuleNotFoundError" in stderr or "No module named" in stderr


def _report_commands(args, merged):
    """Where the report can be built: this interpreter, else an envcheck on PATH (a
    pipx install, say) when this one lacks envcheck's own dependencies."""
    tail = ["report", "--records", merged, "--format", args.format]
    if args.verbose:
        tail.append("--verbose")
    if args.json:
        tail += ["--json", args.json]
    if args.junit:
        tail += ["--junit", args.junit]
    yield [sys.executable, "-m", "envcheck"] + tail
    found = shutil.which("envcheck")
    if found:
        yield [found] + tail


def _on_terminal():
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def start_report(args):
    """Rank 0, as it starts: the report helper (this interpreter's envcheck), started
    now so that its imports and the matrix are done while the probes run; it then waits
    for the records' path on its stdin (``envcheck report --records-on-stdin``). That
    takes its start off the end of the job, where every other host waits for rank 0.
    None where it cannot start; ``render_report`` then starts one as before."""
    cmd = next(_report_commands(args, "-"))
    cmd[cmd.index("--records"):cmd.index("--records") + 2] = ["--records-on-stdin"]
    try:
        return watcher_mod.start_helper(cmd, stdout=None if _on_terminal()
                                        else procs.PIPE)
    except OSError:
        return None


def _finish_helper(proc, records, timeout):
    """The started helper, given the records' path: a CompletedProcess (what it said
    when it ended before: this interpreter lacks envcheck's dependencies, say)."""
    try:
        out, err = proc.communicate(None if proc.poll() is not None else records + "\n",
                                    timeout=timeout)
    except (BrokenPipeError, ValueError):  # it ended as the path was written
        out, err = proc.communicate(timeout=timeout)
    except procs.TimeoutExpired:
        procs.kill_popen(proc)
        proc.communicate()
        raise
    return procs.CompletedProcess(proc.args, proc.returncode, out, err)


def render_report(args, records, started=None):
    """Rank 0: build and judge the report with envcheck's CLI, as envcheck run would
    (``started``: the helper ``start_report`` started early).

    Returns its exit code, or None where no envcheck with its dependencies can be found
    (this interpreter lacks them and none is on PATH).
    """
    terminal = _on_terminal()
    sys.stdout.flush()
    for cmd in _report_commands(args, records):
        try:
            # On a terminal the helper writes to it itself, so that its screen is fitted
            # to it and coloured, as envcheck run's is (an envcheck that lacks its
            # dependencies fails on import, before it writes any of it).
            proc = _finish_helper(started, records, 300) if started else None
            started = None
            if proc is None:
                proc = watcher_mod.run_helper(cmd, 300, stdout=None if terminal
                                              else procs.PIPE)
        except (OSError, procs.TimeoutExpired):
            continue
        if not _missing_dependencies(proc.stderr):
            if not terminal:
                sys.stdout.write(proc.stdout)
            sys.stderr.write(proc.stderr)
            sys.stdout.flush()
            return proc.returncode
    print("envcheck: every rank's records are in %s; this interpreter lacks envcheck's "
          "own dependencies, so build the report where envcheck is installed: "
          "envcheck report --records %s --json report.json (its exit code is the verdict)"
          % (records, records), file=sys.stderr)
    return None


def _unjudged(merged, chunks):
    """No envcheck to judge a good run's outcomes against the matrix: a failed check may
    well be a known issue (envcheck run would exit 0), so exit 0 and say how many failed,
    rather than failing the job on outcomes nobody judged."""
    failed = _failed_checks(chunks)
    if failed:
        print("envcheck: %d check(s) failed, not yet judged against the matrix" % failed,
              file=sys.stderr)
    return RankExit.OK


def agent_line(args, identity, host, probes):
    """'envcheck: nodeB: ranks 2–3 of 4 ran 6 probes; rank 0 prints the report, writes
    report.json; every rank's records: /shared/out'."""
    rank, _, world_size, local_world_size = identity
    ranks = "rank %d" % rank if local_world_size == 1 else \
        "ranks %d–%d" % (rank, rank + local_world_size - 1)
    written = [p for p in (args.json, args.junit) if p]
    return ("envcheck: %s: %s of %d ran %d probe%s; rank 0 prints the report%s; every "
            "rank's records: %s" % (host, ranks, world_size, probes, "" if probes == 1 else "s",
                                    ", writes %s" % " and ".join(written) if written else "",
                                    os.path.abspath(args.out)))


def _check_checkpoint_dir(path):
    if not os.path.isdir(path):
        raise UsageError("--checkpoint-dir %s: no such directory on %s" % (
            path, runtime.host_name()))
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError("--checkpoint-dir %s: not writable on %s" % (
            path, runtime.host_name()))


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m envcheck.worker.launched",
        description="One rank of an envcheck run started by torchrun or srun.")
    p.add_argument("--out", default="envcheck-out", metavar="DIR",
                   help="per-rank records and stacks, and rank 0's records.jsonl; a "
                        "directory every node can write, fresh per job [%(default)s]")
    p.add_argument("--json", metavar="PATH", help="rank 0 writes the JSON report here")
    p.add_argument("--junit", metavar="PATH", help="rank 0 writes JUnit XML here")
    p.add_argument("--format", default="table", choices=("table", "json", "markdown"),
                   help="what rank 0 prints [%(default)s]")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="rank 0's table: a row per check and every advice in full")
    p.add_argument("--probe", "-p", action="append", default=[], metavar="NAME")
    p.add_argument("--skip", action="append", default=[], metavar="NAME")
    p.add_argument("--probe-path", action="append", default=[], metavar="FILE.py")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per probe, and for setup and the final gather [%(default)s]")
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="where the DCP checks write their checkpoints: a directory every "
                        "host mounts, as training's checkpoints need [$%s, else DCP across "
                        "hosts is not tested]" % SHARED_DIR_ENV)
    p.add_argument("--startup-timeout", type=float, metavar="SECONDS",
                   help="for importing torch before setup [the larger of --timeout and 120]")
    p.add_argument("--min-busbw", metavar="GB/S",
                   help="fail a host whose send/recv bus bandwidth (GB/s, nccl-tests' "
                        "busbw) is below 90%% of this, as nccl-tests' NCCL_TESTS_MIN_BW "
                        "does [judged only against the other hosts]")
    args = p.parse_args(argv)
    for flag, value in (("--timeout", args.timeout), ("--startup-timeout", args.startup_timeout)):
        if value is not None and not 0 < value <= plan_mod.MAX_TIMEOUT:
            p.error("%s must be a positive number of seconds, at most %d (a day)"
                    % (flag, plan_mod.MAX_TIMEOUT))
    return args


class Job:
    """One rank of this launched job, as its watcher and its rank both see it."""

    def __init__(self, args, launcher, identity, entries):
        self.args = args
        self.launcher = launcher
        self.rank, self.local_rank, self.world_size, self.local_world_size = identity
        self.identity = identity
        self.out = args.out
        self.timeout = args.timeout
        self.startup_timeout = (args.startup_timeout
                                or plan_mod.startup_timeout(args.timeout))
        self.plan = plan_mod.rank_plan(args.backend, args.timeout, entries,
                                       args.probe_options)
        self.run_id = run_id(os.environ)
        # When this rank's process started its work (the report's duration counts from
        # it): in a rank the host's zygote forked, its watcher's (run_forked).
        self.started = time.time()
        self.started_mono = time.monotonic()  # the watcher's startup clock starts here
        self.host = runtime.host_name()
        # How long rank 0 waits, after its own bad end, for the other ranks' last words:
        # they meet their own deadline at about the same time, plus a grace.
        self.collect_wait = watcher_mod.grace_for(args.timeout) + 5.0

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
                  "copied into one: envcheck report --records DIR" % self.host,
                  file=sys.stderr)
        else:
            source = collected
            _prefer_local(self.out, collected)
            if silent:
                print("envcheck: %s sent no last word within %.0f s (the host died, or "
                      "its link is down): the report shows what they sent before" % (
                          _ranks_on_hosts(collected, silent), self.collect_wait),
                      file=sys.stderr)
        reported = render_report(self.args, source)
        return reported if reported not in (None, RankExit.OK) else (code or 1)


def _prefer_local(out, collected):
    """This host's ranks' own files where they hold more than the store got: a local
    rank's watcher writes its hang record and stacks here first, and its relay may not
    have sent them yet."""
    for name in os.listdir(out):
        if not name.startswith(("records-rank", "stacks-rank")):
            continue
        mine, theirs = os.path.join(out, name), os.path.join(collected, name)
        try:
            if not os.path.exists(theirs) or \
                    os.path.getsize(mine) > os.path.getsize(theirs):
                shutil.copyfile(mine, theirs)
        except OSError:
            continue


def _records_of(directory, rank):
    try:
        with open(records_path(directory, rank), encoding="utf-8", errors="replace") as f:
            return records_mod.parse(f.read())[0]
    except OSError:
        return []


def _ranks_on_hosts(directory, ranks):
    """'rank(s) 2,3 on node2', from the host each rank's records name, else from the
    hosts rank 0 learnt in the launch probe (a rank may have sent nothing at all)."""
    mapping = next((x.get("data", {}).get("hosts") for x in _records_of(directory, 0)
                    if x.get("t") == "check" and x.get("probe") == "launch"
                    and x.get("check") == "rank_mapping"), None) or []
    by_host = {}
    for r in ranks:
        host = next((x["host"] for x in _records_of(directory, r) if x.get("host")), None)
        if host is None and 0 <= r < len(mapping) and isinstance(mapping[r], str):
            host = mapping[r]
        by_host.setdefault(host or "an unknown host", []).append(r)
    return "; ".join("rank(s) %s on %s" % (",".join(map(str, rs)), h)
                     for h, rs in by_host.items())


def _rank_main(job):
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
        pub = relay.Publisher(job.run_id, rank, job.world_size, args.out,
                              relay.hosts_store(os.environ, rank), job.timeout)
        pub.start()
        publisher.append(pub)
        return writer

    report = start_report(args) if rank == 0 else None
    ctx = runtime.run_rank(job.plan, args.out, job.identity, wrap=watched)
    records = ctx.records
    records.write("gather_start")
    chunks = gather_records(ctx, records_path(args.out, rank))
    code = 0
    if rank != 0 and job.local_rank == 0:
        # An agent without rank 0 says what its ranks did, and where the report is.
        print(agent_line(args, job.identity, ctx.host, len(job.plan.get("probes") or ())),
              flush=True)
    if rank == 0:
        merged = os.path.join(os.path.abspath(args.out), MERGED_RECORDS)
        write_atomic(merged, b"".join(c if c.endswith(b"\n") or not c else c + b"\n"
                                       for c in chunks))
        records.write("report_start")
        code = render_report(args, merged, report)
        if code is None:
            code = _unjudged(merged, chunks)
    publisher[0].flush()
    runtime.finish(records, code)


def prepare(argv):
    """The Job this process's arguments and launcher's environment describe; raises
    UsageError (or OSError: --out cannot be made) on bad input."""
    args = parse_args(argv)
    launcher = export_identity(os.environ)
    entries = plan_entries(args.probe, args.skip, args.probe_path)
    identity = runtime.read_identity()
    os.makedirs(args.out, exist_ok=True)  # first: --json may be a file in --out
    if identity[0] == 0:
        for path in (args.json, args.junit):
            if path:
                _check_writable(path)
    args.probe_options = {}
    if args.min_busbw is not None:
        args.probe_options["min_busbw"] = plan_mod.min_busbw(args.min_busbw)
    if args.checkpoint_dir:
        _check_checkpoint_dir(args.checkpoint_dir)
        os.environ[SHARED_DIR_ENV] = args.checkpoint_dir
    return Job(args, launcher, identity, entries)


def run_forked(argv, started):
    """A rank the host's zygote forked (``hostzygote.py``) for the watcher that sent
    ``argv`` and its environment, and started its work at ``started``: the same job,
    rebuilt from them. Never returns."""
    try:
        job = prepare(argv)
    except (UsageError, OSError) as exc:  # its watcher's own prepare() passed: a race
        print("envcheck: error: %s" % exc, file=sys.stderr)
        return RankExit.USAGE
    job.started = started
    _rank_main(job)
    return 1


def _start_rank(job, argv):
    """Fork the rank, or have the host's zygote fork it (one import of torch for every
    local rank under torchrun): its pid, and the zygote's Fork or None."""
    if hostzygote.wanted(job.launcher, job.local_world_size):
        if job.local_rank == 0:
            hostzygote.start(argv, job.local_world_size, job.startup_timeout)
        fork = hostzygote.ask(argv, job.started, job.startup_timeout)
        if fork is not None:
            return fork.pid, fork
        # Refused, or no fork within the startup timeout (the zygote's import stalled):
        # this rank imports torch itself, with a startup timeout of its own.
        job.started_mono = time.monotonic()
    return watcher_mod.fork_rank(lambda: _rank_main(job)), None


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
    pid, fork = _start_rank(job, argv)
    sys.exit(watcher_mod.Watcher(pid, job, fork).run())


if __name__ == "__main__":
    main()
