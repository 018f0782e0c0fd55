"""Nothing envcheck starts outlives it, whatever kills envcheck and whatever a probe does.

Three pieces, because no one of them covers every case:

- **A marker.** Every rank of a local run gets ``ENVCHECK_RUN=<id>`` in its environment,
  and everything a rank starts inherits it, ``setsid`` or not. ``kill_marked`` finds
  those processes through ``/proc/PID/environ`` (same user) and kills them: the
  supervisor does it after every attempt, which catches grandchildren that left the
  rank's process group.
- **A lifeline.** The supervisor holds the write end of a pipe; each rank holds the read
  end (``ENVCHECK_LIFELINE_FD``) and a thread blocked on it. When the supervisor dies in
  any way — SIGKILL included — the pipe reaches end of file; the thread kills every
  process of the run's marker, removes the run's work directory and ends the rank.
- **Flags, not exceptions, in signal handlers** (``envcheck.run.supervisor``): a signal
  never interrupts the supervisor halfway through starting or recording a rank.
"""

import errno
import os
import re
import shutil
import signal
import tempfile
import threading

from .errors import UsageError

RUN_DIR_PREFIX = "envcheck-run-"
MARKER = "ENVCHECK_RUN"
LIFELINE = "ENVCHECK_LIFELINE_FD"
WORKDIR = "ENVCHECK_WORKDIR"


def _pids():
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


def carries(pid, name, value):
    """Does the process's environment hold ``name=value``? (Its environment as it was
    started: a zombie's reads empty, another user's cannot be read: not ours.)"""
    needle = ("%s=%s" % (name, value)).encode()
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def marked(run_id, exclude=(), name=MARKER):
    """PIDs of live processes whose environment carries this run's marker (or another
    variable ``name`` with the value ``run_id``)."""
    return [pid for pid in _pids() if pid not in exclude and carries(pid, name, run_id)]


def signal_proven(pid, sig, proof):
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


def kill_marked(run_id, exclude=(), name=MARKER):
    """SIGKILL every process of the run (but ``exclude``); returns how many. Each is
    proven to carry the marker at the moment it is signalled."""
    pids = marked(run_id, set(exclude) | {os.getpid()}, name)
    return sum(signal_proven(pid, signal.SIGKILL, lambda p: carries(p, name, run_id))
               for pid in pids)


def parent_of(pid):
    """The PID of the process's parent, or None (gone)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descends_from(pid, root):
    """Is ``pid`` a child, grandchild ... of ``root``? Read now, link by link."""
    seen = set()
    while pid not in (None, 0, 1) and pid not in seen:
        seen.add(pid)
        pid = parent_of(pid)
        if pid == root:
            return True
    return False


def descendants(root=None, exclude=()):
    """The processes below ``root`` (this process), but those in ``exclude`` and below."""
    root = os.getpid() if root is None else root
    children = {}
    for pid in _pids():
        children.setdefault(parent_of(pid), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in exclude and child not in found:
                found.append(child)
                todo.append(child)
    return found


def kill_descendants(exclude=(), rounds=5):
    """SIGKILL every process below this one (but ``exclude`` and theirs): as the run's
    subreaper, this process inherits whatever a rank left behind, a daemon that changed
    its session and cleared its environment included. Each is proven a descendant at the
    moment it is signalled. Returns how many."""
    me, killed = os.getpid(), 0
    for _ in range(rounds):  # a killed parent's children come to this process: again
        pids = [p for p in descendants(me, exclude) if not is_zombie(p)]
        if not pids:
            break
        killed += sum(signal_proven(pid, signal.SIGKILL, lambda p: descends_from(p, me))
                      for pid in pids)
    return killed


def is_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def hold_lifeline(environ=os.environ):
    """In a rank: end the whole run when the supervisor dies. No-op without a lifeline
    (launcher mode: torchrun and srun own their ranks' lives)."""
    fd, run_id = environ.get(LIFELINE), environ.get(MARKER)
    if not fd or not run_id:
        return None
    fd = int(fd)
    workdir = environ.get(WORKDIR)

    def watch():
        while True:
            try:
                if not os.read(fd, 4096):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        # The supervisor is gone: nobody will stop, report or clean up after this run.
        # One rank does it: ranks killing each other mid-scan could each die before
        # reaching a grandchild further down /proc.
        if workdir and not _first_to_end(workdir):
            os._exit(1)  # another rank is ending the run, this one included
        kill_marked(run_id)
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        os._exit(1)

    thread = threading.Thread(target=watch, name="envcheck-lifeline", daemon=True)
    thread.start()
    return thread


def _first_to_end(workdir):
    """Take the run's end-of-life lock (held until this process exits); False when
    another rank holds it."""
    import fcntl

    try:
        fd = os.open(os.path.join(workdir, ".lifeline.lock"), os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        # Held by another rank; a directory already gone means the run is over anyway.
        return exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) and \
            os.path.isdir(workdir)
    return True


def make_run_dir():
    """The run's own 0700 directory in the temp dir, named after this process so that a
    later run can tell it was left behind (the machine went down mid-run), and remove it."""
    try:
        base = tempfile.gettempdir()
        sweep_run_dirs(base)
        path = tempfile.mkdtemp(prefix="%s%d-" % (RUN_DIR_PREFIX, os.getpid()), dir=base)
    except OSError as exc:  # includes "No usable temporary directory found"
        raise UsageError("no usable temporary directory for the run (%s): set TMPDIR to a "
                         "writable directory" % (exc.strerror or exc)) from None
    os.chmod(path, 0o700)
    return path


def sweep_run_dirs(base):
    """Remove this user's run directories whose envcheck process is gone."""
    return sweep_dead(base, re.compile(r"^%s(\d+)-" % re.escape(RUN_DIR_PREFIX)))


def left_by_dead(base, pattern):
    """The paths in ``base`` named by ``pattern`` (its group 1 is the PID of the process
    that made one) that are this user's and whose process is gone."""
    try:
        names = os.listdir(base)
    except OSError:
        return []
    found = []
    for name in names:
        m = pattern.match(name)
        path = os.path.join(base, name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            if os.stat(path).st_uid != os.getuid() or alive(int(m.group(1))):
                continue
        except OSError:
            continue
        found.append(path)
    return found


def sweep_dead(base, pattern):
    """Remove the directories ``left_by_dead``."""
    removed = left_by_dead(base, pattern)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


PR_SET_PDEATHSIG = 1


def die_with_parent(parent):
    """SIGKILL this process when ``parent`` dies (Linux): a zygote when its supervisor
    goes, a launcher-mode rank when its watcher goes. Children it forks do not inherit it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(1)


def outlive_parent():
    """Undo ``die_with_parent``: from now on this process outlives its parent."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
