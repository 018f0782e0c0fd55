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

- **Timeouts.** A watchdog thread follows the rank's records. Past the plan's timeout in
  one phase (setup, a probe, between probes, teardown, the final gather) it writes a
  ``hang`` record, dumps every thread's Python stack to ``DIR/stacks-rank{RANK}.txt`` and
  to stderr, and exits with code 124, so that the launcher tears the job down. A rank
  blocked inside torch.distributed (waiting for a peer) waits a short grace first: the
  peer that is really stuck should be the one that reports. Ranks torn down by the
  launcher (SIGTERM) dump their stacks to their stacks file on the way out. As a backstop
  for a hang that holds the GIL, faulthandler's own timer dumps stacks and exits 1.
- **One report.** After the last probe, rank 0 gathers every rank's records through the
  process group (tensors only: all_gather_object needs numpy in some torch builds) and
  writes them, all ranks, to ``DIR/records.jsonl``. This side may import only the stdlib
  and torch, so the report itself is built where envcheck is installed:
  ``envcheck report --records DIR/records.jsonl`` (or ``--records DIR`` after a hang,
  when no rank could gather: then each rank's own files are read). Rank 0 runs that for
  you when this interpreter has envcheck's dependencies; its exit code is rank 0's.

Records this mode adds to ``records.py``'s: ``launch`` (every rank, first: launcher,
world size, the plan) and ``hang`` (the watchdog: phase, check, waited_s, timeout,
in_collective).
"""

import argparse
import ctypes
import faulthandler
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from ..core import catalog, plan as plan_mod, records as records_mod
from ..core.atomic import write_atomic
from ..core.errors import UsageError
from ..core.outcomes import RankExit
from ..core.phases import PhaseTracker
from ..core.records import MERGED_RECORDS, records_path, stacks_path
from . import runtime

POLL_S = 0.05
BACKSTOP_EXTRA_S = 10.0


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


def _in_torch_distributed(thread_id):
    """Is that thread inside torch.distributed (i.e. most likely waiting for a peer)?"""
    frame = sys._current_frames().get(thread_id)
    marker = os.sep + os.path.join("torch", "distributed") + os.sep
    while frame is not None:
        if marker in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class Watchdog(threading.Thread):
    """Bounds every phase of this rank by the plan's timeout; see the module docstring."""

    def __init__(self, rank, host, timeout, startup_timeout, stacks_file):
        super().__init__(name="envcheck-watchdog", daemon=True)
        self.rank, self.host, self.timeout = rank, host, timeout
        self.grace = min(5.0, max(1.0, 0.2 * timeout))
        self.stacks_file = stacks_file
        self.records = None
        self._lock = threading.Lock()
        self._main = threading.main_thread().ident
        self.tracker = PhaseTracker()
        self.limit = startup_timeout
        self._arm()

    def _arm(self):
        # The C-level timer fires even if a probe holds the GIL and this thread cannot run.
        faulthandler.dump_traceback_later(self.limit + self.grace + BACKSTOP_EXTRA_S,
                                          exit=True, file=self.stacks_file)

    def enter(self, phase, limit=None, check=None):
        """A phase of launcher mode's own (gather, report), past the tracker's."""
        with self._lock:
            self.tracker.enter(phase, check=check)
            self.limit = self.timeout if limit is None else limit
        self._arm()

    def observe(self, rec):
        with self._lock:
            changed = self.tracker.observe(rec)
            if changed:
                self.limit = self.timeout
        if changed:
            self._arm()

    def run(self):
        graced = None
        while True:
            time.sleep(POLL_S)
            with self._lock:
                t = self.tracker
                phase, check, started, limit = t.phase, t.check, t.started, self.limit
            waited = time.monotonic() - started
            if waited <= limit:
                graced = None
                continue
            in_collective = _in_torch_distributed(self._main)
            if in_collective and graced != started:
                graced = started
                with self._lock:
                    if self.tracker.started == started:
                        self.limit = limit + self.grace
                continue
            self.fire(phase, check, waited, in_collective)

    def fire(self, phase, check, waited, in_collective):
        where = phase + ("/%s" % check if check else "")
        line = ("envcheck: rank %d on %s: no progress for %.1f s in %s (timeout %g s)%s; "
                "Python stacks follow; exiting with code %d\n" % (
                    self.rank, self.host, waited, where, self.timeout,
                    ", waiting inside torch.distributed" if in_collective else "", RankExit.HANG))
        try:
            if self.records is not None:
                self.records.write("hang", phase=phase, check=check,
                                   waited_s=round(waited, 3), timeout=self.timeout,
                                   host=self.host, in_collective=in_collective)
            self.stacks_file.write(line)
            self.stacks_file.flush()
            faulthandler.dump_traceback(file=self.stacks_file, all_threads=True)
            sys.stderr.write(line)
            sys.stderr.flush()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        finally:
            os._exit(RankExit.HANG)


class WatchedRecords:
    """The rank's RecordWriter, seen by the watchdog, safe to write from its thread."""

    def __init__(self, writer, watchdog):
        self._writer = writer
        self._watchdog = watchdog
        self._lock = threading.Lock()

    def write(self, kind, **fields):
        # Bounded wait: a record about a hang must not wait for the hung thread forever.
        locked = self._lock.acquire(timeout=1.0)
        try:
            self._watchdog.observe(dict(fields, t=kind))
            self._writer.write(kind, **fields)
        finally:
            if locked:
                self._lock.release()

    def close(self):
        self._writer.close()


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


def render_report(args, merged, chunks):
    """Rank 0: build and judge the report with envcheck's CLI, as envcheck run would.

    Its exit code is the report's. Where no envcheck with its dependencies can be found,
    nothing can judge the outcomes against the matrix here: a failed check may well be a
    known issue (envcheck run would exit 0), so this exits 0 and says how to get the
    verdict, rather than failing the job on outcomes nobody judged.
    """
    sys.stdout.flush()
    for cmd in _report_commands(args, merged):
        try:
            # stdout is this rank's own: on a terminal the screen is fitted to it and
            # coloured, as envcheck run's is (an envcheck that lacks its dependencies
            # fails on import, before it writes any of it)
            proc = subprocess.run(cmd, stdout=None, stderr=subprocess.PIPE, text=True,
                                  timeout=300)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if not _missing_dependencies(proc.stderr):
            sys.stderr.write(proc.stderr)
            return proc.returncode
    failed = _failed_checks(chunks)
    print("envcheck: every rank's records are in %s; this interpreter lacks envcheck's "
          "own dependencies, so build the report where envcheck is installed: "
          "envcheck report --records %s --json report.json (its exit code is the verdict)"
          "%s" % (merged, merged, "; %d check(s) failed, not yet judged against the "
                  "matrix" % failed if failed else ""), file=sys.stderr)
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
    p.add_argument("--startup-timeout", type=float, metavar="SECONDS",
                   help="for importing torch before setup [the larger of --timeout and 120]")
    args = p.parse_args(argv)
    for flag, value in (("--timeout", args.timeout), ("--startup-timeout", args.startup_timeout)):
        if value is not None and not 0 < value <= plan_mod.MAX_TIMEOUT:
            p.error("%s must be a positive number of seconds, at most %d (a day)"
                    % (flag, plan_mod.MAX_TIMEOUT))
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        launcher = export_identity(os.environ)
        entries = plan_entries(args.probe, args.skip, args.probe_path)
        identity = runtime.read_identity()
        if identity[0] == 0:
            for path in (args.json, args.junit):
                if path:
                    _check_writable(path)
        os.makedirs(args.out, exist_ok=True)
    except (UsageError, OSError) as exc:
        print("envcheck: error: %s" % exc, file=sys.stderr)
        sys.exit(RankExit.USAGE)
    rank = identity[0]
    plan = plan_mod.rank_plan(args.backend, args.timeout, entries)
    try:
        os.remove(records_path(args.out, rank))  # a previous job's, in a reused --out
    except FileNotFoundError:
        pass
    # Append mode: runtime.start truncates this file when it opens it for SIGUSR1, and
    # whatever this handle writes afterwards lands at the end, not over that.
    stacks = open(stacks_path(args.out, rank), "a", encoding="utf-8")
    watchdog = Watchdog(rank, runtime.host_name(), args.timeout,
                        args.startup_timeout or plan_mod.startup_timeout(args.timeout), stacks)
    watchdog.start()
    t0 = time.time()

    def watched(writer):
        # Ranks the launcher tears down leave their stacks: where they were waiting.
        faulthandler.register(signal.SIGTERM, file=stacks, all_threads=True, chain=True)
        records = WatchedRecords(writer, watchdog)
        watchdog.records = records
        records.write("launch", launcher=launcher, run_id=run_id(os.environ),
                      world_size=identity[2], local_world_size=identity[3],
                      plan=plan_mod.summary(plan), python=sys.executable,
                      python_version=platform.python_version(),
                      master_port=os.environ.get("MASTER_PORT"), started=t0)
        return records

    def peer_died_after_its_last_probe():
        # That peer is the root cause. Give the launcher time to see its exit first and
        # tear this rank down, so torchrun's "first observed failure" names the right rank.
        time.sleep(watchdog.grace)
        faulthandler.cancel_dump_traceback_later()

    ctx = runtime.run_rank(plan, args.out, identity, wrap=watched,
                           on_teardown_failed=peer_died_after_its_last_probe)
    records = ctx.records
    watchdog.enter("gather", check="gather_records")
    chunks = gather_records(ctx, records_path(args.out, rank))
    code = 0
    if rank != 0 and identity[1] == 0:
        # An agent without rank 0 says what its ranks did, and where the report is.
        print(agent_line(args, identity, ctx.host, len(plan.get("probes") or ())),
              flush=True)
    if rank == 0:
        merged = os.path.join(os.path.abspath(args.out), MERGED_RECORDS)
        write_atomic(merged, b"".join(c if c.endswith(b"\n") or not c else c + b"\n"
                                       for c in chunks))
        watchdog.enter("report", limit=300.0)
        code = render_report(args, merged, chunks)
    faulthandler.cancel_dump_traceback_later()
    runtime.finish(records, code)


if __name__ == "__main__":
    main()
