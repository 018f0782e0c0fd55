"""Which rank is the root cause when a job stops: one rule for both drivers.

As torch elastic does, the root cause is the *earliest* failure, and ranks stuck after a
peer failed are consequences. What "stuck after a peer" means differs by kind:

- **hang**: a rank waiting inside ``torch.distributed`` (a collective, a barrier, the
  store) is waiting for a peer; a rank stuck anywhere else (a sleep, a loop, I/O, a
  deadlock in user code) is the cause. Among equals, the one whose deadline came first.
  The local supervisor tells "waiting" from the Python stack it collected; launcher mode
  from the watcher's look at its stack dump (``in_collective`` in a ``hang``
  record). The rendezvous waits for every rank: while a rank is still starting (phase
  ``startup``: its interpreter, or ``import torch``), the ranks in ``setup`` are waiting
  for it, whatever their stacks show, and the rank that never started is the cause.
- **crash**: a rank whose final barrier failed, or that the launcher tore down (it left a
  SIGTERM stack dump), only reacted to a peer's death; among the others the one that
  stopped first.
"""

import collections
import os
import re
import time

# phase: where the rank is (core.phases), when the driver knows it.
Suspect = collections.namedtuple("Suspect", "rank in_collective deadline phase",
                                 defaults=(None,))
Frame = collections.namedtuple("Frame", "path line function")
Casualty = collections.namedtuple("Casualty", "rank consequence when")

_DIST_FRAME = os.sep + os.path.join("torch", "distributed") + os.sep
# a frame of torch's own Python code (an installed wheel, or a checkout named pytorch): the
# module path after it names the function the job called (torch/cuda/__init__.py ->
# torch.cuda)
_TORCH_FRAME = re.compile(r"[/\\](?:(?:site|dist)-packages|pytorch)[/\\](torch(?:[/\\]\w+)*)"
                          r"[/\\](\w+)\.py$")
_THREAD_HEADER = re.compile(r"^(?:Current thread|Thread) 0x([0-9a-fA-F]+)", re.M)
_FRAME = re.compile(r'^\s+File "(.*)", line (\d+) in (\S+)', re.M)
# Frames that say nothing of where a rank is: the interpreter's own modules (a wait in
# threading.py) and envcheck's rank driver around every probe.
_PLUMBING = (os.sep + "threading.py", os.sep + "selectors.py", os.sep + "subprocess.py",
             os.path.join("envcheck", "worker", "runtime.py"),
             os.path.join("envcheck", "worker", "context.py"))
# envcheck run's own rendezvous (worker/runtime.py): rank 0's TCPStore waits for the other
# ranks inside its C++ constructor, the others poll for its listener; no frame of
# torch.distributed shows, yet the rank is waiting for its peers.
_RENDEZVOUS_FILE = os.path.join("envcheck", "worker", "runtime.py")
_RENDEZVOUS = ("_init_process_group", "_await_listener")


def main_thread_stack(dump):
    """The main thread's part of a faulthandler dump of all threads.

    faulthandler lists threads newest first, so the main thread is the last block of a
    dump. A launcher-mode rank's stacks file may hold several dumps: its watcher's request
    at the deadline, then torchrun's SIGTERM, then another while the rank unwinds (a
    collective that failed when the peer died, its exception being formatted). The first
    is where the rank was when the first of them came, before the teardown moved it: that
    dump's main thread is the one read (a CI run blamed a rank that had waited in
    barrier, from its second dump, in the error the peer's death raised).
    """
    dump = first_dump(dump or "")
    starts = [m.start() for m in _THREAD_HEADER.finditer(dump)]
    return dump[starts[-1]:] if starts else dump


def first_dump(text):
    """The first faulthandler dump of ``text``: a dump lists each thread once, so the
    next begins at the first thread named again."""
    seen = set()
    for m in _THREAD_HEADER.finditer(text):
        thread = int(m.group(1), 16)
        if thread in seen:
            return text[:m.start()]
        seen.add(thread)
    return text


def waiting_in_distributed(dump):
    """Is the main thread of this stack dump inside torch.distributed (or envcheck's own
    rendezvous, which is torch's TCPStore)?"""
    return _DIST_FRAME in main_thread_stack(dump).replace("/", os.sep) \
        or _in_rendezvous(frames(dump))


def _in_rendezvous(stack):
    return bool(stack) and stack[0].function in _RENDEZVOUS \
        and stack[0].path.replace("/", os.sep).endswith(_RENDEZVOUS_FILE)


def reached_main_thread(dump, thread):
    """Has this faulthandler dump come to the frames of the thread ``thread`` (the
    rank's main thread, ``threading.get_ident()`` in its ``hello`` record)?
    faulthandler lists the main thread last, so a dump that shows its first frame is
    whole but for that thread's last lines; one that does not may be cut short, however
    long it has stopped growing."""
    header = re.search(r"^(?:Current thread|Thread) 0x0*%x \(most recent call first\):\n"
                       % thread, dump or "", re.M)
    return header is not None and bool(_FRAME.match(header.string, header.end()))


# A dump is read when it has come to the rank's main thread and has not grown for
# DUMP_STEADY_S: a rank descheduled mid-dump on a loaded node pauses longer than a poll
# (a CI run's screen tests twice read a hung run whose waiting ranks' places were
# missing: once after one 50 ms poll, once after 0.15 s without growth, at most 2 s).
DUMP_STEADY_S = 0.15
DUMP_WAIT_S = 5.0  # at most: a rank that cannot dump (its SIGUSR1 not yet handled)
_POLL_S = 0.05


def await_dumps(files, threads, wait_s=DUMP_WAIT_S, steady_s=DUMP_STEADY_S):
    """Wait, after asking ranks for their stacks (SIGUSR1), until each one's dump is
    whole; ``files``: {rank: (path, offset the dump starts at)}, ``threads``: {rank: its
    main thread (its hello's ``thread``) or None}. Whole: it has come to the main thread
    and stopped growing; for a rank not yet past its hello, it has content and stopped
    growing. Returns {rank: the dump}, whatever each is at ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pending = set(files)
    sizes: dict = {}
    since: dict = {}
    while pending and time.monotonic() < deadline:
        now = time.monotonic()
        for rank in sorted(pending):
            path, offset = files[rank]
            try:
                size = os.path.getsize(path)
            except OSError:
                size = 0
            if size != sizes.get(rank):
                sizes[rank], since[rank] = size, now
            elif size > offset and now - since[rank] >= steady_s and (
                    threads.get(rank) is None
                    or reached_main_thread(_read(path, offset), threads[rank])):
                pending.discard(rank)
        if pending:
            time.sleep(_POLL_S)
    return {rank: _read(path, offset) for rank, (path, offset) in files.items()}


def _read(path, offset):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return ""


def frames(dump):
    """The main thread's frames, innermost first (as faulthandler lists them)."""
    return [Frame(m.group(1), int(m.group(2)), m.group(3))
            for m in _FRAME.finditer(main_thread_stack(dump))]


def whereabouts(dump):
    """Where a rank's main thread is, for people: ``{"at": "file.py:8 func",
    "waiting_in": "all_reduce" or None}``, or None when the dump shows no frame.

    ``at`` is the innermost frame of the user's or torch's code; ``waiting_in`` is the
    outermost torch.distributed function the rank is inside (what it called: all_reduce,
    barrier, DistributedDataParallel's sync), when it is waiting in one.
    """
    stack = frames(dump)
    if not stack:
        return None
    useful = [f for f in stack if not any(p in f.path.replace("/", os.sep)
                                          for p in _PLUMBING)] or stack
    inner = useful[0]
    dist = [f for f in stack if _DIST_FRAME in f.path.replace("/", os.sep)
            and not f.function.startswith("_") and f.function != "wrapper"]
    if not dist and _in_rendezvous(stack):
        inner = stack[0]
    at = "%s:%d %s" % (os.path.basename(inner.path), inner.line, inner.function)
    torch_call = _TORCH_FRAME.search(inner.path)
    if torch_call and not dist and not _in_rendezvous(stack):
        # stuck in a torch call that is no collective (torch.cuda.synchronize behind a
        # kernel that never ends, a Future's wait): the job's own line that made it, and
        # the call by its name, say more than torch's file (a GPU run's
        # "__init__.py:1162 synchronize")
        caller = next((f for f in useful if not _TORCH_FRAME.search(f.path)), None)
        package, module = torch_call.groups()
        name = ".".join(package.replace("\\", "/").split("/")
                        + ([] if module == "__init__" else [module]) + [inner.function])
        if caller is not None:
            at = "%s:%d %s, in %s" % (os.path.basename(caller.path), caller.line,
                                      caller.function, name)
    return {"at": at,
            "waiting_in": dist[-1].function if dist else
            "init_process_group" if _in_rendezvous(stack) else None}


def hang_root(suspects):
    """The rank to blame for a hang, from ``Suspect(rank, in_collective, deadline, phase)``."""
    starting = any(s.phase == "startup" for s in suspects)
    return min(suspects, key=lambda s: (
        bool(s.in_collective) or (starting and s.phase == "setup"), s.deadline, s.rank)).rank


def waiting_for(suspects, root):
    """The ranks that were waiting at the rendezvous for ``root``, a rank still starting
    (empty when ``root`` is not in phase startup)."""
    if not any(s.rank == root and s.phase == "startup" for s in suspects):
        return []
    return sorted(s.rank for s in suspects if s.phase == "setup")


def crash_root(casualties):
    """The rank to blame for a crash, from ``Casualty(rank, consequence, when)``."""
    return min(casualties, key=lambda c: (bool(c.consequence), c.when, c.rank)).rank
