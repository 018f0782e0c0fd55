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


def marked(run_id, exclude=()):
    """PIDs of live processes whose environment carries this run's marker."""
    needle = ("%s=%s" % (MARKER, run_id)).encode()
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid in exclude:
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:  # gone, or another user's: not ours either way
            continue
    return found


def kill_marked(run_id, exclude=()):
    """SIGKILL every process of the run (but ``exclude``); returns how many."""
    pids = marked(run_id, set(exclude) | {os.getpid()})
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(pids)


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


def sweep_dead(base, pattern):
    """Remove the directories in ``base`` named by ``pattern`` (its group 1 is the PID
    of the process that made one) that are this user's and whose process is gone."""
    try:
        names = os.listdir(base)
    except OSError:
        return []
    removed = []
    for name in names:
        m = pattern.match(name)
        path = os.path.join(base, name)
        if not m or int(m.group(1)) == os.getpid():
            continue
        try:
            if os.stat(path).st_uid != os.getuid() or _alive(int(m.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid):
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
