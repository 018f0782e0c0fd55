"""The one place a process is made or signalled.

Every process envcheck starts comes from here: an interpreter or a tool
(``popen``, ``run``), or a fork (``fork``). Every signal envcheck sends leaves from here:
to a child not yet reaped (``send``), to a rank's whole process group (``send_group``),
or to a process proven first to be the one meant (``send_proven``: a pidfd pins it, so a
PID reused between the proof and the signal is never hit). ``tests/test_launch.py``
fails when any other module of envcheck makes a process or sends a signal.

It also reads what the kernel says of a process (``/proc``): its parent, whether it is a
zombie or stopped, what its environment carries, what runs below it. Those are the
proofs the senders use.

stdlib only: ranks import it under an interpreter that has nothing but torch.
"""

import os
import signal
import subprocess
import sys
from typing import Any, Callable, Collection, List, Optional, Sequence

# What callers pass to and catch from ``popen`` and ``run``, so that no other module
# needs subprocess itself.
PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
TimeoutExpired = subprocess.TimeoutExpired
CompletedProcess = subprocess.CompletedProcess


# --- making ---------------------------------------------------------------------------

def popen(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """A process started now (``subprocess.Popen``)."""
    return subprocess.Popen(cmd, **kwargs)


def run(cmd: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
    """A process run to its end (``subprocess.run``); ``TimeoutExpired`` kills it."""
    return subprocess.run(cmd, **kwargs)


def fork() -> int:
    """``os.fork`` with this process's stdio flushed first, so that nothing buffered is
    written twice (once by each side)."""
    sys.stdout.flush()
    sys.stderr.flush()
    return os.fork()


def exit_code(status: int) -> int:
    """A wait status as Popen's returncode: the exit code, or minus the signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


# --- signalling -----------------------------------------------------------------------

def send(pid: int, sig: int) -> bool:
    """``sig`` to ``pid``: a child of this process not yet reaped (its PID is its own
    until then). False where it is gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def send_group(pgid: int, sig: int) -> bool:
    """``sig`` to the process group led by ``pgid`` (a rank in a session of its own),
    while its leader is not reaped: until then the group cannot be another's. False
    where it is gone or not ours."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_popen(proc: subprocess.Popen) -> None:
    """SIGKILL a process ``popen`` started (it is reaped by its Popen)."""
    try:
        proc.kill()
    except OSError:
        pass


def send_proven(pid: int, sig: int, proof: Callable[[int], bool]) -> bool:
    """Send ``sig`` to ``pid`` only if ``proof(pid)`` holds for that very process:
    a pidfd pins the process first (Linux 5.3), so a PID reused between the proof and
    the signal is not signalled. True when sent."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfd here: the proof right before the kill
        fd = None
    try:
        if not proof(pid):
            return False
        if fd is None:
            os.kill(pid, sig)
        else:
            signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def alive(pid: int) -> bool:
    """Does a process with this PID exist (another user's included)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- what the kernel says of a process (/proc) ----------------------------------------

def pids() -> List[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def _stat_fields(pid: int) -> Optional[List[bytes]]:
    """The fields of /proc/PID/stat after the command name: state, ppid, ... or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def parent_of(pid: int) -> Optional[int]:
    """The PID of the process's parent, or None (gone)."""
    fields = _stat_fields(pid)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def is_zombie(pid: int) -> bool:
    """Dead and not yet reaped (or gone: nothing to signal either way)."""
    fields = _stat_fields(pid)
    return not fields or fields[0] == b"Z"


def is_stopped(pid: int) -> bool:
    """Is the process stopped (SIGSTOP, SIGTSTP: state T) or traced (t)? It then runs no
    signal handler: a SIGUSR1 for its stacks, or a SIGTERM, only waits, pending."""
    fields = _stat_fields(pid)
    return fields is not None and fields[:1] in ([b"T"], [b"t"])


def carries(pid: int, name: str, value: str) -> bool:
    """Does the process's environment hold ``name=value``? (Its environment as it was
    started: a zombie's reads empty, another user's cannot be read: not ours.)"""
    needle = ("%s=%s" % (name, value)).encode()
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def descends_from(pid: Optional[int], root: int) -> bool:
    """Is ``pid`` a child, grandchild ... of ``root``? Read now, link by link."""
    seen = set()
    while pid not in (None, 0, 1) and pid not in seen:
        seen.add(pid)
        pid = parent_of(pid)
        if pid == root:
            return True
    return False


def descendants(root: Optional[int] = None, exclude: Collection[int] = ()) -> List[int]:
    """The processes below ``root`` (this process), but those in ``exclude`` and below."""
    root = os.getpid() if root is None else root
    children: dict = {}
    for pid in pids():
        children.setdefault(parent_of(pid), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in exclude and child not in found:
                found.append(child)
                todo.append(child)
    return found
