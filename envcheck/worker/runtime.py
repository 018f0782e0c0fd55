"""One rank's life: start, set up the process group, run the planned probes, tear down.

Used by ``python -m envcheck.worker.rank`` (ranks started by ``envcheck run``). Reads
torchrun-style env (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), imports torch once, initialises the process group, runs the planned probes
one after another and streams records (see ``records.py``). SIGUSR1 makes it dump every
thread's Python stack to ``stacks-rank{RANK}.txt``: that is how the supervisor learns
where a hung rank is stuck, even inside a C++ collective.
"""

import datetime
import faulthandler
import importlib
import importlib.util
import os
import signal
import sys
import threading
import time
import traceback

from . import rendezvous
from .context import Context, is_stop
from ..launch import contain
from ..core.host import host_name
from ..core.text import first_line
from ..core.outcomes import RankExit
from ..core.records import RecordWriter, records_path, stacks_path


def load_probe(entry):
    """The probe function named by a plan entry: a module name or a file path."""
    if entry.get("path"):
        name = "envcheck_user_probes_%x" % (hash(entry["path"]) & 0xFFFFFFFF)
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, entry["path"])
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    else:
        module = importlib.import_module(entry["module"])
    return getattr(module, entry["function"])


def auto_backend(cuda_available, device_count, nccl_available, local_world_size):
    """--backend auto: nccl when every rank on this host has a GPU of its own, else gloo.
    The same answer on every rank of a host (it never reads LOCAL_RANK): deciding per
    rank put rank 0 on nccl and rank 1 on gloo when ranks outnumbered GPUs, and both
    waited in init_process_group until the timeout (seen on an H200, torch 2.11)."""
    if cuda_available and nccl_available and 0 < local_world_size <= device_count:
        return "nccl"
    return "gloo"


def _resolve_backend(torch, requested, local_world_size):
    if requested != "auto":
        return requested
    available = torch.cuda.is_available()
    return auto_backend(available, torch.cuda.device_count() if available else 0,
                        torch.distributed.is_nccl_available(), local_world_size)


def _error(exc):
    return {"type": type(exc).__name__, "message": str(exc),
            "traceback": traceback.format_exc()}


def _import_all(names):
    for name in dict.fromkeys(names):
        try:
            importlib.import_module(name)
        except Exception:
            pass  # left for the probe to meet and report


def preload(entries):
    """Import what the planned probes will import lazily (a probe's declared ``preload``,
    probes/suite.py: torch._dynamo, which DistributedDataParallel's first construction
    pulls in, DCP), so that it runs while this rank waits anyway: for its peers at the
    rendezvous and in the first probes' collectives. Errors are left for the probe to meet
    and report."""
    _import_all(name for e in entries for name in e.get("preload") or ())


class Preloading:
    """The rank's thread importing what its probes will need, in two parts.

    First every ``preload`` (torch's own modules; already done where the zygote did it
    before the fork), from the start. Then every ``preload_in_rank``: the training
    frameworks (Lightning, Accelerate: a second or more of CPU each). Those only ever
    here, never in the zygote: they read the rank's environment as they import
    (Lightning sets ``rank_zero_only.rank`` from RANK), which the zygote's lacks. And
    they begin only when the probe before the first that needs them starts (ddp-sync,
    in the default suite, which mostly waits on its peers): begun with the rank, they
    took the GIL and cores from the CPU-bound probes before (checkpoint's round trips)
    and made a 2-rank run on 2 cores a second longer. With no probe before, at once.
    """

    def __init__(self, plan):
        entries = plan["probes"]
        need = [i for i, e in enumerate(entries) if e.get("preload_in_rank")]
        self._begin_at = max(0, need[0] - 1) if need else None
        self._begin = threading.Event()
        if self._begin_at == 0:
            self._begin.set()
        self.torch_done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(entries,),
                                       name="envcheck-preload", daemon=True)
        self.thread.start()

    def _run(self, entries):
        try:
            preload(entries)
        finally:
            self.torch_done.set()
        if self._begin_at is None:
            return
        self._begin.wait()
        _import_all(name for e in entries
                    for name in e.get("preload_in_rank") or ())

    def finish(self):
        """Everything imported, now."""
        self._begin.set()
        self.thread.join()

    def before(self, index, entry, user_code):
        """Before the probe at ``index`` of the plan (``entry``) is loaded and runs.

        Never two threads importing torch's modules at once (its circular imports could
        meet a half-initialised module): a probe that imports any of them lazily waits
        for all of them. A probe that imports a framework waits for the frameworks too,
        and so does code of the user's (``user_code``: a --probe-path file; a --model,
        see ``finish_preload``), which may import them itself (Lightning imports part of
        transformers). The default suite's own probes run beside a framework's import:
        what they import for the first time there was compared with what Lightning and
        Accelerate import (configparser and fsspec are the only modules both do, neither
        imports back, and a thread that meets a module another is importing waits)."""
        if user_code:
            self.finish()
            return
        if self._begin_at is not None and index >= self._begin_at:
            self._begin.set()
        if entry.get("preload_in_rank"):
            self.finish()
        elif entry.get("preload"):
            self.torch_done.wait()


def start_preload(plan):
    return Preloading(plan)


def finish_preload():
    """Before the user's code runs (worker/user_model.py, a --model): whatever the preload
    thread imports is imported, so the two never import the same module at once."""
    if _preloading is not None:
        _preloading.finish()


def start(plan, out_dir, identity, forked=None):
    """Stack dumps on SIGUSR1, the record stream, ``import torch``: before any probe.
    ``forked``: the zygote that forked this rank (``zygote_pid``) and imported torch
    for it (``torch_import_s``), or None."""
    rank, local_rank, _, _ = identity
    # Under envcheck run: if the supervisor dies, this rank takes the run down with it.
    contain.hold_lifeline()
    # Segfaults print the Python stack to stderr, which the supervisor keeps the tail of.
    faulthandler.enable(file=sys.stderr, all_threads=True)
    stacks = open(stacks_path(out_dir, rank), "w", encoding="utf-8")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    records = RecordWriter(records_path(out_dir, rank), rank)
    host = host_name()
    t0 = time.monotonic()
    import torch  # noqa: F401 - imported once for the whole suite, and timed
    seconds = round(time.monotonic() - t0, 3)
    # thread: how this rank's main thread is named in its stack dumps, which tells a
    # reader that a dump has come to it (core.blame.reached_main_thread)
    if forked:  # the zygote imported torch for every rank: that is the time it took
        records.write("hello", pid=os.getpid(), host=host, python=sys.executable,
                      thread=threading.get_ident(),
                      torch_import_s=forked["torch_import_s"],
                      zygote_pid=forked["zygote_pid"])
    else:
        records.write("hello", pid=os.getpid(), host=host, python=sys.executable,
                      thread=threading.get_ident(), torch_import_s=seconds)
    global _preloading
    _preloading = start_preload(plan)
    return records, host


_preloading = None  # the Preloading of what the probes will need


def setup(plan, records, host, identity):
    """init_process_group; returns the Context, or None after recording the failure."""
    import torch
    import torch.distributed as dist

    from . import environment

    rank, local_rank, world_size, local_world_size = identity
    backend = _resolve_backend(torch, plan["backend"], local_world_size)
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    mine = {"host": host, "pid": os.getpid(), "local_rank": local_rank, "device": str(device),
            "backend": backend,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if rank == 0:
        mine["environment"] = environment.collect(torch)
    records.write("env", **mine)

    timeout = float(plan["timeout"])
    # The group's own timeout may be longer than the probe timeout: under envcheck run
    # the supervisor must be the one to notice a hang, while ranks are still inside the
    # collective, so that their stacks show where they were stuck.
    group_timeout = float(plan.get("group_timeout") or timeout)
    records.write("setup_start", backend=backend)
    t0 = time.monotonic()
    # Before the rendezvous: what would make it hang, found in milliseconds, with the
    # host and the fix (worker/rendezvous.py). A failure skips init_process_group.
    stopped = rendezvous.run(plan, records, host, identity, backend)
    prechecks_s = round(time.monotonic() - t0, 6)  # theirs and the agreement's (bench/)
    if stopped:
        records.write("setup", outcome="failed", backend=backend,
                      seconds=round(time.monotonic() - t0, 6), error=stopped)
        return None
    try:
        if backend == "nccl":
            torch.cuda.set_device(device)
        _init_process_group(dist, backend, rank, world_size,
                            datetime.timedelta(seconds=group_timeout))
    except BaseException as exc:
        if is_stop(exc):
            raise
        records.write("setup", outcome="failed", backend=backend,
                      seconds=round(time.monotonic() - t0, 6), error=_error(exc))
        return None
    ctx = Context(records, rank, local_rank, world_size, local_world_size, backend, device,
                  timeout, plan.get("options", {}), host)
    ctx.init_seconds = time.monotonic() - t0
    records.write("setup", outcome="passed", backend=backend,
                  seconds=round(ctx.init_seconds, 6), prechecks_s=prechecks_s)
    return ctx


def _init_process_group(dist, backend, rank, world_size, timeout):
    """The launcher's rendezvous in launcher mode, as training uses it (env://). Under
    envcheck run, a store of this run's own: keys go under the run's id, so ranks that
    reached another job's store on the port (two runs started at once) write nothing that
    job reads, and rank 0 failing to bind is a port clash the supervisor retries."""
    run_id = os.environ.get(contain.MARKER)
    if not run_id:
        dist.init_process_group(backend=backend, init_method="env://", rank=rank,
                                world_size=world_size, timeout=timeout)
        return
    port = int(os.environ["MASTER_PORT"])
    if rank != 0:
        _await_listener(port, timeout.total_seconds())
    store = dist.TCPStore(os.environ["MASTER_ADDR"], port, world_size, rank == 0, timeout)
    dist.init_process_group(backend=backend, store=dist.PrefixStore("envcheck/%s/" % run_id,
                                                                    store),
                            rank=rank, world_size=world_size, timeout=timeout)


def _await_listener(port, seconds):
    """Until something listens on ``port`` (rank 0's store), at most ``seconds``.

    A rank whose store client connects before rank 0 listens sleeps torch's connect
    backoff (0.5 to 1.5 s, jittered) before it tries again, and ranks forked at one
    instant often do: the whole job then waits that long at the rendezvous. Read from
    /proc/net/tcp and tcp6 (this network namespace's sockets), so rank 0's store never
    sees a connection that is not a client's. Where they cannot be read, or nothing
    listens in time, torch's own connect and retry take over, and report what they meet.
    """
    want = ":%04X" % port
    deadline = time.monotonic() + seconds
    while True:
        readable = False
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(name, encoding="ascii", errors="replace") as f:
                    rows = f.read().splitlines()[1:]
            except OSError:
                continue
            readable = True
            for row in rows:
                fields = row.split()
                # local_address is HEXIP:HEXPORT; state 0A is LISTEN
                if len(fields) > 3 and fields[1].endswith(want) and fields[3] == "0A":
                    return True
        if not readable or time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def run_probes(ctx, entries):
    for index, entry in enumerate(entries):
        ctx.probe = entry["name"]
        ctx.declared = entry.get("checks")
        # A probe with follow-up phases (core.plan.follow_ups): where it hands state on,
        # and in a follow-up, which phase this is.
        ctx.handoff, ctx.phase = entry.get("handoff"), entry.get("phase")
        ctx._records.write("probe_start", probe=entry["name"])
        p0 = time.monotonic()
        try:
            if _preloading is not None:
                _preloading.before(index, entry, bool(entry.get("path")))
            probe = load_probe(entry)
            probe(ctx)
        except BaseException as exc:
            if is_stop(exc):
                raise
            # Outside any ctx.check(): the probe itself broke (or its file did not load);
            # a BaseException subclass from torch (CheckpointException) too.
            ctx._records.write("check", probe=entry["name"], check="run", outcome="failed",
                               seconds=round(time.monotonic() - p0, 6),
                               detail=first_line("%s: %s" % (type(exc).__name__, exc)),
                               error=_error(exc), advice=None, data={})
        ctx._records.write("probe_end", probe=entry["name"],
                           seconds=round(time.monotonic() - p0, 6))
    ctx.probe = ctx.declared = ctx.handoff = ctx.phase = None


def teardown(ctx):
    """Wait for every rank, then leave without destroy_process_group().

    destroy_process_group() is not what envcheck tests, and it can hang: on torch 2.1.2
    with gloo, the last rank sometimes blocks in it for the whole store timeout once its
    peer (the store's host) has exited (seen in 2 of 9 runs). After a final barrier no
    rank needs the group any more.
    """
    import torch.distributed as dist

    ctx._records.write("teardown_start")
    try:
        dist.barrier()
    except Exception as exc:
        # A peer died after its last probe; what it did is already recorded. Say so in
        # one line rather than a traceback in the launcher's log.
        ctx._records.write("teardown", outcome="failed", error=_error(exc))
        sys.stderr.write("envcheck: rank %d: final barrier failed: %s: %s\n"
                         % (ctx.rank, type(exc).__name__, first_line(exc)))
        return False
    ctx._records.write("bye")
    return True


def run_rank(plan, out_dir, identity, wrap=None, on_teardown_failed=None, forked=None,
             before_exit=None):
    """One rank's life, the same under both drivers: start, setup, probes, teardown.

    Returns the Context after a clean final barrier; otherwise the rank exits here with
    ``RankExit.SETUP_FAILED`` or ``RankExit.TEARDOWN_FAILED``, after ``before_exit``
    (launcher mode: its host's records to the job's store, from this process, which
    has torch and the store's connection already). ``wrap`` may wrap the record writer
    (launcher mode's watchdog follows every record through it).
    """
    writer, host = start(plan, out_dir, identity, forked)
    records = wrap(writer) if wrap else writer
    ctx = setup(plan, records, host, identity)
    if ctx is None:
        if before_exit:
            before_exit()
        finish(records, RankExit.SETUP_FAILED)
    run_probes(ctx, plan["probes"])
    if not teardown(ctx):
        if on_teardown_failed:
            on_teardown_failed()
        if before_exit:
            before_exit()
        finish(records, RankExit.TEARDOWN_FAILED)
    return ctx


def finish(records, code=0):
    records.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: torch's atexit hooks and thread joins can take seconds,
    # and everything this rank had to say is already on disk.
    os._exit(code)
