"""Containment: nothing envcheck starts outlives it, whatever kills envcheck and whatever
a probe does.

Four pieces, because no one of them covers every case (docs/safety.md says which works
where):

- **A marker.** Every process of a local run gets ``ENVCHECK_RUN=<id>`` in its
  environment, and everything it starts inherits it, ``setsid`` or not. ``kill_marked``
  finds those processes through ``/proc/PID/environ`` (same user) and kills them: the
  supervisor does it after every attempt, which catches grandchildren that left the
  rank's process group.
- **A lifeline.** The supervisor holds the write end of a pipe; each rank holds the read
  end (``ENVCHECK_LIFELINE_FD``) and a thread blocked on it. When the supervisor dies in
  any way, SIGKILL included, the pipe reaches end of file; the thread kills every
  process of the run's marker, removes the run's work directory and ends the rank.
- **A subreaper.** The supervisor is the subreaper of what the run starts
  (``set_subreaper``): ranks forked by a zygote become its children, and whatever a rank
  leaves behind (a daemon that changed its session and cleared its environment) comes to
  it, to be killed (``kill_descendants``) and reaped (``reap_orphans``).
- **Death with the parent** (``die_with_parent``, ``PR_SET_PDEATHSIG``): a zygote dies
  with its supervisor, a launcher-mode rank with its watcher.

A cgroup per attempt, where the machine offers one, comes on top: ``launch/cgroup.py``.

stdlib only (and ``core.errors`` for the one refusal a user can fix).
"""

import ctypes
import errno
import os
import re
import shutil
import signal
import tempfile
import threading
from typing import Collection, Iterable, List, Mapping, Optional, Pattern

from . import procs
from ..core.errors import UsageError

RUN_DIR_PREFIX = "envcheck-run-"
MARKER = "ENVCHECK_RUN"
LIFELINE = "ENVCHECK_LIFELINE_FD"
WORKDIR = "ENVCHECK_WORKDIR"
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


def marked(run_id: str, exclude: Collection[int] = (), name: str = MARKER) -> List[int]:
    """PIDs of live processes whose environment carries this run's marker (or another
    variable ``name`` with the value ``run_id``)."""
    return [pid for pid in procs.pids()
            if pid not in exclude and procs.carries(pid, name, run_id)]


def kill_marked(run_id: str, exclude: Iterable[int] = (), name: str = MARKER) -> int:
    """SIGKILL every process of the run (but ``exclude``); returns how many. Each is
    proven to carry the marker at the moment it is signalled."""
    pids = marked(run_id, set(exclude) | {os.getpid()}, name)
    return sum(procs.send_proven(pid, signal.SIGKILL,
                                 lambda p: procs.carries(p, name, run_id))
               for pid in pids)


def kill_descendants(exclude: Collection[int] = (), rounds: int = 5) -> int:
    """SIGKILL every process below this one (but ``exclude`` and theirs): as the run's
    subreaper, this process inherits whatever a rank left behind, a daemon that changed
    its session and cleared its environment included. Each is proven a descendant at the
    moment it is signalled. Returns how many."""
    me, killed = os.getpid(), 0
    for _ in range(rounds):  # a killed parent's children come to this process: again
        pids = [p for p in procs.descendants(me, exclude) if not procs.is_zombie(p)]
        if not pids:
            break
        killed += sum(procs.send_proven(pid, signal.SIGKILL,
                                        lambda p: procs.descends_from(p, me))
                      for pid in pids)
    return killed


def set_subreaper(on: bool) -> bool:
    """Make this process the subreaper of its descendants (Linux); False where it cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(known: Collection[int]) -> None:
    """Wait for dead children this process did not start itself: as the subreaper it
    inherits what the ranks left (a killed ``setsid`` grandchild), which would otherwise
    stay zombies until envcheck exits. ``known``: PIDs that are waited for elsewhere."""
    me = os.getpid()
    for pid in procs.pids():
        if pid in known or not procs.is_zombie(pid) or procs.parent_of(pid) != me:
            continue
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def hold_lifeline(environ: Mapping[str, str] = os.environ) -> Optional[threading.Thread]:
    """In a rank: end the whole run when the supervisor dies. No-op without a lifeline
    (launcher mode: torchrun and srun own their ranks' lives)."""
    lifeline, run_id = environ.get(LIFELINE), environ.get(MARKER)
    if not lifeline or not run_id:
        return None
    fd = int(lifeline)
    workdir = environ.get(WORKDIR)

    def watch() -> None:
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


def _first_to_end(workdir: str) -> bool:
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


def make_run_dir() -> str:
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


def sweep_run_dirs(base: str) -> List[str]:
    """Remove this user's run directories whose envcheck process is gone."""
    return sweep_dead(base, re.compile(r"^%s(\d+)-" % re.escape(RUN_DIR_PREFIX)))


def left_by_dead(base: str, pattern: Pattern[str]) -> List[str]:
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
            if os.stat(path).st_uid != os.getuid() or procs.alive(int(m.group(1))):
                continue
        except OSError:
            continue
        found.append(path)
    return found


def sweep_dead(base: str, pattern: Pattern[str]) -> List[str]:
    """Remove the directories ``left_by_dead``."""
    removed = left_by_dead(base, pattern)
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed



def die_with_parent(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies (Linux): a zygote when its supervisor
    goes, a launcher-mode rank when its watcher goes. Children it forks do not inherit it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(1)


def outlive_parent() -> None:
    """Undo ``die_with_parent``: from now on this process outlives its parent."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
