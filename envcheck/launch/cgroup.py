"""Containment that does not depend on the ranks' cooperation: a cgroup per attempt.

Where the machine offers a cgroup v2 hierarchy that envcheck may write to (root, or a
delegated subtree), each attempt gets a child of envcheck's own cgroup,
``envcheck-<pid>-<n>``. Its zygote (or each rank started alone) is moved in as soon as
it is started, before it imports torch, so every process a rank starts is in it too,
whatever it does after: a new session, a cleared environment, a double fork. When the
attempt ends the cgroup is killed whole (``cgroup.kill``, Linux 5.14; else each member,
proven a member as it is signalled), emptied and removed.

Where there is none (cgroup v1 only, no write access, not Linux) ``make`` returns None
and the subreaper does the work (``contain.kill_descendants``): both run always,
the cgroup first. An envcheck that was SIGKILLed leaves its cgroup, and whatever hid
there; the next envcheck to make one kills and removes it (``sweep_stale``).
docs/safety.md says which is used where.
"""

import os
import re
import signal
import time
from typing import List, Optional

from . import contain, procs

_counter = [0]


def _mount() -> Optional[str]:
    """Where the cgroup v2 hierarchy is mounted, or None."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    return left.split()[4]
    except OSError:
        pass
    return None


def _own_path() -> Optional[str]:
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def _members(path: str) -> List[int]:
    try:
        with open(os.path.join(path, "cgroup.procs"), encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


class Cgroup:
    """One attempt's cgroup: ``add`` a process started for it, ``kill`` everything in it,
    ``close`` to remove it (killing first)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = os.path.basename(path)

    def add(self, pid: int) -> bool:
        """Move ``pid`` (just started by this process, not yet running torch) in."""
        try:
            with open(os.path.join(self.path, "cgroup.procs"), "w", encoding="ascii") as f:
                f.write(str(pid))
            return True
        except OSError:  # gone already, or not allowed after all: the subreaper remains
            return False

    def _holds(self, pid: int) -> bool:
        """Is ``pid`` in this cgroup now? (/proc/PID/cgroup names it.)"""
        try:
            with open("/proc/%d/cgroup" % pid, encoding="utf-8", errors="replace") as f:
                return any(line.startswith("0::") and line.rstrip().endswith("/" + self.name)
                           for line in f)
        except OSError:
            return False

    def kill(self, wait_s: float = 5.0) -> None:
        """SIGKILL every process in it, and wait until it is empty."""
        try:
            with open(os.path.join(self.path, "cgroup.kill"), "w", encoding="ascii") as f:
                f.write("1")
        except OSError:  # before Linux 5.14: one by one, each proven a member
            pass
        deadline = time.monotonic() + wait_s
        while True:
            members = [p for p in _members(self.path) if p != os.getpid()]
            if not members or time.monotonic() > deadline:
                return
            for pid in members:
                procs.send_proven(pid, signal.SIGKILL, self._holds)
            time.sleep(0.01)

    def close(self) -> None:
        self.kill()
        try:
            os.rmdir(self.path)
        except OSError:
            pass


_NAME = re.compile(r"^envcheck-(\d+)-\d+$")


def sweep_stale(parent: str) -> List[str]:
    """Kill and remove the cgroups in ``parent`` left by an envcheck that is gone (it was
    SIGKILLed: the ranks' lifeline ended what carried the run's marker, not a daemon
    that had cleared its environment, which stayed in its cgroup)."""
    swept = contain.left_by_dead(parent, _NAME)
    for path in swept:
        Cgroup(path).close()
    return swept


def make() -> Optional[Cgroup]:
    """A new cgroup below this process's own, or None where none can be made. The
    first one of a process sweeps what a killed envcheck left beside it."""
    if os.environ.get("ENVCHECK_CGROUP", "1") == "0":
        return None
    mount, own = _mount(), _own_path()
    if mount is None or own is None:
        return None
    parent = os.path.join(mount, own.lstrip("/"))
    if not _counter[0]:
        sweep_stale(parent)
    _counter[0] += 1
    path = os.path.join(parent, "envcheck-%d-%d" % (os.getpid(), _counter[0]))
    try:
        os.mkdir(path)
    except OSError:
        return None
    return Cgroup(path)
