"""A round of a probe with its checks kept here, not written: the ``repeat`` probe runs
the collectives and bandwidth probes again and again, and reports what each check did
over the rounds as checks of its own.

``RoundContext`` is the probe's ``ctx`` with one difference: ``check(name)`` records the
check's outcome, detail, data and seconds in a ``Tally`` instead of the rank's record
stream (which would hold the same check N times). What stops a rank (Ctrl-C, SIGTERM)
still stops it.
"""

import time

from ...worker.context import Check, CheckSkipped, is_stop


class Tally:
    """Per check id ('collectives.all_reduce'), this rank's results, one per round."""

    def __init__(self):
        self.results = {}  # id -> [{"outcome", "detail", "data", "seconds"}, ...]

    def add(self, check_id, outcome, detail="", data=None, seconds=0.0):
        self.results.setdefault(check_id, []).append(
            {"outcome": outcome, "detail": detail, "data": data or {}, "seconds": seconds})

    def failed(self, check_id):
        return sum(r["outcome"] == "failed" for r in self.results.get(check_id, ()))

    def run(self, ctx, name, probe):
        """One round of ``probe(ctx)`` (a probe function) under the name ``name``; an
        exception outside its checks counts as its check ``run`` failing."""
        t0 = time.monotonic()
        try:
            probe(RoundContext(ctx, self, name))
        except BaseException as exc:
            if is_stop(exc):
                raise
            self.add("%s.run" % name, "failed", _line(exc), seconds=time.monotonic() - t0)


def _line(exc):
    from ...core.text import first_line

    return first_line("%s: %s" % (type(exc).__name__, exc)) or type(exc).__name__


class _Scope:
    def __init__(self, tally, check_id):
        self._tally, self._id = tally, check_id
        self._check = Check(check_id.rsplit(".", 1)[-1])

    def __enter__(self):
        self._t0 = time.monotonic()
        return self._check

    def __exit__(self, exc_type, exc, tb):
        seconds = time.monotonic() - self._t0
        c = self._check
        if exc is None:
            self._tally.add(self._id, "passed", c.detail, c.data, seconds)
        elif isinstance(exc, CheckSkipped):
            self._tally.add(self._id, "skipped", str(exc), c.data, seconds)
        elif is_stop(exc):
            return False
        else:
            self._tally.add(self._id, "failed", str(exc).split("\n", 1)[0] or
                            type(exc).__name__, c.data, seconds)
        return True


class RoundContext:
    """``ctx`` for one round of a probe: everything the rank's, but its checks tallied."""

    def __init__(self, ctx, tally, name):
        self._ctx, self._tally, self._name = ctx, tally, name

    def __getattr__(self, attr):
        return getattr(self._ctx, attr)

    def check(self, name):
        return _Scope(self._tally, "%s.%s" % (self._name, name))
