"""From the rounds' figures to the per-host answer, and which hosts stall: pure (stdlib).

Per host, three figures of everything measured over the rounds: the best, the median and
the worst (for times the smallest is the best, for bandwidth the largest). A *stall* is
a round trip of ``STALL_FLOOR_S`` or more and ``STALL_FACTOR`` times the median round
trip of the run or more: a retransmission timeout (Linux: 200 ms at least), not the
jitter of a busy machine (a few milliseconds here, under a load of 10 on 2 cores).

A unit (host) *stalls* when every pair it is in stalled at least ``MIN_STALLS`` times
and at least ``PEER_RATIO`` times as often as the median pair it is not in: a lost
packet stalls the pairs of the host that drops it, a loaded machine all pairs alike.
With two units there is one pair: both are named, as either end may be the cause.
"""

import statistics

STALL_FLOOR_S = 0.05
STALL_FACTOR = 50.0
MIN_STALLS = 3
PEER_RATIO = 3.0
# bandwidth.per_host failing on a host in at least this share of the rounds (and twice
# at least) fails it here: one failed round in twenty is the noise of a busy machine.
FLAKY_SHARE = 0.1
FLAKY_MIN = 2


def spread(values, larger_is_better=False):
    """{"best", "median", "worst"} of ``values`` (None when there are none)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    lo, hi = min(values), max(values)
    best, worst = (hi, lo) if larger_is_better else (lo, hi)
    return {"best": best, "median": statistics.median(values), "worst": worst}


def stall_threshold(times):
    """Seconds from which a round trip is a stall, for this run's round trips."""
    positive = [t for t in times if t > 0]
    median = statistics.median(positive) if positive else 0.0
    return max(STALL_FLOOR_S, STALL_FACTOR * median)


def stall_counts(pair_times, threshold):
    """{pair: (stalls, round trips)}."""
    return {p: (sum(t >= threshold for t in ts), len(ts)) for p, ts in pair_times.items()}


def stalling(n_units, counts):
    """The units that stall (module docstring), in unit order."""
    if n_units == 2 and counts:
        (stalls, _), = counts.values()
        return [0, 1] if stalls >= MIN_STALLS else []
    out = []
    for u in range(n_units):
        mine = [c[0] for p, c in counts.items() if u in p]
        others = [c[0] for p, c in counts.items() if u not in p]
        if not mine:
            continue
        base = statistics.median(others) if others else 0
        if min(mine) >= MIN_STALLS and min(mine) >= PEER_RATIO * base:
            out.append(u)
    return out


def flaky(failed_rounds, rounds):
    """Is a check that failed in ``failed_rounds`` of ``rounds`` a failure of the host?"""
    return failed_rounds >= max(FLAKY_MIN, FLAKY_SHARE * rounds)


def ms(seconds):
    """'0.31', '12', '208': milliseconds with the digits that matter."""
    value = seconds * 1000.0
    return "%.0f" % value if value >= 10 else "%.2g" % value
