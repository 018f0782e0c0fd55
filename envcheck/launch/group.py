"""The ranks a driver started, keyed by rank: the one place they are signalled, waited
for and ended, as torch elastic's ``PContext`` holds its workers.

Both drivers use it: ``envcheck run``'s supervisor for every rank of an attempt, and a
launcher-mode watcher for its one rank. A rank is whatever started it (a ``Popen``, a
fork server's ``ForkedRank``, a watcher's own fork) seen as ``pid``, ``poll()`` and
``returncode``.

A signal reaches a rank only while its PID is provably its own:

- a rank this process will reap (its child, or one whose exit status its fork server
  passes on) is signalled while ``poll()`` has not seen it end: until it is reaped, its
  PID cannot be another process's;
- a rank whose parent is someone else (the host's fork server forked it for a watcher)
  also carries a ``proof`` checked on the pinned process (``procs.send_proven``).

``close(grace)`` is the one way an attempt's ranks end: SIGTERM to each rank's process
group (a rank the fork server forked leads its own session, and its children are in
it), the grace, then SIGKILL. What left the groups is the containment's to find
(``contain.py``, ``cgroup.py``).
"""

import signal
import time
from typing import Callable, Collection, Dict, Iterator, List, Optional

try:  # 3.8+
    from typing import Protocol
except ImportError:  # pragma: no cover - the ranks' oldest interpreters
    Protocol = object  # type: ignore[assignment]

from . import procs

POLL_S = 0.02
KILL_WAIT_S = 5.0


class Proc(Protocol):
    pid: int
    returncode: Optional[int]

    def poll(self) -> Optional[int]: ...


class RankGroup:
    def __init__(self) -> None:
        self._procs: Dict[int, Proc] = {}
        self._proofs: Dict[int, Callable[[int], bool]] = {}
        self._leads: Dict[int, bool] = {}

    # -- who is in it ---------------------------------------------------------------------
    def add(self, rank: int, proc: Proc, proof: Optional[Callable[[int], bool]] = None,
            leads_group: bool = True) -> None:
        """Take ``proc`` as ``rank``. ``proof``: what must hold of its PID before a signal
        (it is not this process's to reap). ``leads_group``: it leads a process group of
        its own (a session), so its group can be signalled; a rank a watcher forked
        itself shares the watcher's group, and only the rank is."""
        self._procs[rank] = proc
        self._leads[rank] = leads_group
        if proof is not None:
            self._proofs[rank] = proof

    def __len__(self) -> int:
        return len(self._procs)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._procs))

    def proc(self, rank: int) -> Proc:
        return self._procs[rank]

    def alive(self) -> List[int]:
        """The ranks not seen to end."""
        return [r for r in self if self._procs[r].poll() is None]

    def ended(self) -> bool:
        return not self.alive()

    # -- signals ---------------------------------------------------------------------------
    def signal(self, rank: int, sig: int) -> bool:
        """``sig`` to the rank's process only (a stack dump: SIGUSR1). False where it is
        gone, or its PID cannot be proven its own."""
        proc = self._procs[rank]
        if proc.poll() is not None:
            return False
        proof = self._proofs.get(rank)
        if proof is not None:
            return procs.send_proven(proc.pid, sig, proof)
        return procs.send(proc.pid, sig)

    def signal_group(self, rank: int, sig: int) -> bool:
        """``sig`` to the rank's process group (its children too), while the rank is not
        seen to end; to the rank alone where it leads no group of its own."""
        proc = self._procs[rank]
        if not self._leads[rank] or rank in self._proofs:
            return self.signal(rank, sig)
        if proc.poll() is not None:
            return False
        return procs.send_group(proc.pid, sig)

    # -- the end ---------------------------------------------------------------------------
    def wait(self, deadline: float) -> bool:
        """Until every rank ended or ``deadline`` (time.monotonic()); True when all did."""
        while True:
            if self.ended():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)

    def close(self, grace: float, ranks: Optional[List[int]] = None,
              at_once: Collection[int] = ()) -> None:
        """End the ranks (all of them, or ``ranks``): SIGTERM to each one's group, up to
        ``grace`` seconds for them to go, then SIGKILL and up to KILL_WAIT_S more.
        ``at_once``: ranks that get SIGKILL with the others' SIGTERM, right after it (a
        stopped rank runs no handler). Not before it: a peer that dies first fails the
        others' collectives, and they would report that failure instead of being told to
        stop."""
        chosen = list(self) if ranks is None else list(ranks)
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_WAIT_S)):
            for rank in sorted(chosen, key=lambda r: r in at_once):
                self.signal_group(rank, signal.SIGKILL if rank in at_once else sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if all(self._procs[r].poll() is not None for r in chosen):
                    return
                time.sleep(POLL_S)

    def kill_now(self, ranks: List[int]) -> None:
        """SIGKILL to these ranks' groups at once (a stopped rank runs no handler)."""
        for rank in ranks:
            self.signal_group(rank, signal.SIGKILL)
