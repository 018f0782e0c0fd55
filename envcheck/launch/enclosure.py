"""Launcher mode: what a rank starts ends when the rank ends, however the job ends.

Under ``envcheck run`` the supervisor contains every rank (``contain``, ``cgroup``).
Under torchrun or srun there is no supervisor: each rank has a watcher beside it
(``worker/watcher.py``), and the watcher contains its one rank the same ways, so that a
helper the rank started (a probe's, the user model's, a DataLoader's) does not outlive
the job with ppid 1 on that host:

- **A cgroup of the rank's own**, where the machine offers one (``cgroup.make``): the
  rank moves itself in before its target runs (``enter``; a rank the host's zygote forks
  is told the path in the request), so everything it starts is in it too, in any
  session, with any environment.
- **A marker**, ``ENVCHECK_RANK_MARK=<run id>.<rank>``, in the rank's environment and so
  in everything that does not clear it: found through ``/proc`` where there is no cgroup.
  One per rank, not per job: in the namespace cluster the hosts share one ``/proc``.
- **A subreaper**: the watcher is the subreaper of the rank it forks, the host's zygote
  of the ranks it forks (``forkserver``), so what a rank orphans comes to one of them,
  not to init, and is killed with its descendants.

``close`` (when the rank has ended: reaped by the watcher, or its status passed on by
the zygote) kills all three. A watcher that was itself SIGKILLed leaves its rank's
cgroup behind (its rank dies with it): the next watcher on that host to end sweeps it
(``cgroup.sweep_stale``: it is named after the dead watcher's PID), and the zygote kills
the cgroup and the marker of a fork whose watcher's connection closed.

stdlib only: watchers and ranks import it.
"""

import os
from typing import Collection, Dict, Optional

from . import cgroup as cgroup_mod, contain

MARK = "ENVCHECK_RANK_MARK"


def mark(run_id: str, rank: int) -> str:
    return "%s.%d" % (run_id, rank)


def enter(path: Optional[str]) -> bool:
    """In the rank, before it runs anything: move this process into its cgroup."""
    if not path:
        return False
    try:
        with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as f:
            f.write("0")
        return True
    except OSError:  # gone, or not allowed after all: the marker and subreaper remain
        return False


def end_fork(environ: Dict[str, str], path: Optional[str]) -> None:
    """The zygote, for a fork whose watcher is gone: what that rank started goes too."""
    if path:
        cgroup_mod.Cgroup(path).kill(wait_s=1.0)
    if environ.get(MARK):
        contain.kill_marked(environ[MARK], name=MARK)


class Enclosure:
    """One rank's enclosure, held by its watcher."""

    def __init__(self, run_id: str, rank: int) -> None:
        self.mark = mark(run_id, rank)
        self.cgroup = cgroup_mod.make()
        self.reaping = contain.set_subreaper(True)
        self.closed = False

    @property
    def path(self) -> Optional[str]:
        return self.cgroup.path if self.cgroup is not None else None

    def environ(self, environ: Dict[str, str]) -> Dict[str, str]:
        """The rank's environment: ``environ`` with its marker."""
        return dict(environ, **{MARK: self.mark})

    def close(self, spare: Collection[int] = ()) -> None:
        """Kill whatever the rank left: its cgroup, its marker, this watcher's
        descendants but ``spare`` (the host's zygote, still serving other ranks) and
        theirs. Once; again is a no-op."""
        if self.closed:
            return
        self.closed = True
        if self.cgroup is not None:
            self.cgroup.close()
        contain.kill_marked(self.mark, name=MARK)
        if self.reaping:
            contain.kill_descendants(exclude=spare)
            contain.reap_orphans(known=spare)
        if self.cgroup is not None:
            # a watcher SIGKILLed on this host left its rank's cgroup: sweep it now
            cgroup_mod.sweep_stale(os.path.dirname(self.cgroup.path))
