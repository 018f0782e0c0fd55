"""Where a rank is in its life, read from its records: the one phase state machine.

Phases, in order: ``startup`` (before ``setup_start``: starting Python, importing torch),
``setup`` (init_process_group), ``probe:NAME`` (with the current ``check`` when one is
open), ``between`` (after a probe ended, before the next started), ``teardown`` (the
final barrier), ``done`` (``bye``). Launcher mode adds ``gather`` (``gather_start``) and
``report`` (``report_start``) after ``bye``: every rank sends rank 0 its records, and rank 0
builds the report.

Every phase is bounded by the plan's timeout (``startup`` by the startup timeout): the
local supervisor, launcher mode's per-rank watcher and the report built from launcher
records all follow a rank with this one tracker. A probe that runs in rounds (``repeat``,
``--repeat N``) writes a ``round`` record as each begins: its limit is counted afresh
then, so that each round, not the whole probe, is bounded by the timeout.
"""

import time


class PhaseTracker:
    def __init__(self, started=None):
        self.phase = "startup"
        self.check = None
        self.started = time.monotonic() if started is None else started

    def enter(self, phase, now=None, check=None):
        self.phase, self.check = phase, check
        self.started = time.monotonic() if now is None else now

    def observe(self, rec, now=None):
        """Advance with one record (a dict with ``t``); True when the phase changed."""
        kind = rec["t"]
        if kind == "setup_start":
            self.enter("setup", now)
        elif kind == "probe_start":
            self.enter("probe:" + rec["probe"], now)
        elif kind == "check_start":
            self.check = rec.get("check")
            return False
        elif kind == "check":
            self.check = None
            return False
        elif kind == "round":  # a probe's next round (--repeat): its own full limit
            self.started = time.monotonic() if now is None else now
            return False
        elif kind == "probe_end":
            self.enter("between", now)
        elif kind == "teardown_start":
            self.enter("teardown", now)
        elif kind == "bye":
            self.enter("done", now)
        elif kind in ("gather_start", "report_start"):  # launcher mode, after bye
            self.enter(kind[:-len("_start")], now)
        else:
            return False
        return True

    @property
    def probe(self):
        """The probe this rank is in, or None outside probes."""
        return self.phase[len("probe:"):] if self.phase.startswith("probe:") else None


def replay(records):
    """The tracker after every record of one rank (for records read after the fact)."""
    tracker = PhaseTracker(started=0.0)
    for rec in records:
        tracker.observe(rec, now=rec.get("time", 0.0))
    return tracker
