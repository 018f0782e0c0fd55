"""The one deadline rule for a rank, followed by both drivers.

A rank's life is a sequence of phases (``core/phases.py``: startup, setup, probe:NAME,
between, teardown, done, and in launcher mode gather and report). The rule:

- **startup** (starting Python, importing torch) is bounded by the startup limit, counted
  from when the rank's start began;
- **every later phase** by the phase limit (the plan's timeout), counted afresh at each
  phase change; a phase may have a limit of its own (launcher mode's ``report``: rank 0
  builds and judges the report);
- **once per phase, a grace** for a rank found waiting inside torch.distributed on a peer:
  the peer that is really stuck should reach its own deadline first and be the one
  named. The local supervisor sees every rank and blames from their stacks
  (``core/blame.py``), so it gives none; launcher mode's watcher sees one rank only, and
  gives one (``grace_for``).

``Watchdog`` reads the phase from the rank's tracker, so that there is one record of
where the rank is, and holds only the grace. The local supervisor (``run/supervisor.py``)
and launcher mode's watcher (``worker/watcher.py``) keep one per rank.

stdlib only.
"""

from typing import Dict, Optional, Protocol

STARTUP = "startup"


class Tracker(Protocol):
    """What the rule reads of a rank: ``core.phases.PhaseTracker``."""

    phase: str
    started: float


def grace_for(timeout: float) -> float:
    """The grace a rank waiting on a peer gets: a fifth of the timeout, 1 to 5 s."""
    return min(5.0, max(1.0, 0.2 * timeout))


class Watchdog:
    """One rank's deadline under the rule above."""

    def __init__(self, tracker: Tracker, timeout: float, startup_timeout: float,
                 limits: Optional[Dict[str, float]] = None, grace: float = 0.0) -> None:
        self.tracker = tracker
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.limits = dict(limits or {})
        self.grace = grace
        self._graced: Optional[float] = None  # the start of the phase the grace was for

    def limit(self) -> float:
        """Seconds the current phase may last, its grace included once given."""
        phase = self.tracker.phase
        base = self.startup_timeout if phase == STARTUP else self.limits.get(phase, self.timeout)
        return base + (self.grace if self._graced == self.tracker.started else 0.0)

    def deadline(self) -> float:
        """When the current phase runs out (the tracker's clock: time.monotonic)."""
        return self.tracker.started + self.limit()

    def expired(self, now: float) -> bool:
        return now > self.deadline()

    def extend(self) -> bool:
        """Give the current phase its grace: True the first time, False after (the
        rank is then as stuck as it looks)."""
        if not self.grace or self._graced == self.tracker.started:
            return False
        self._graced = self.tracker.started
        return True
