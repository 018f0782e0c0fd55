"""From the receivers' clocks to a figure per unit, and which units are slow: pure.

Figures are nccl-tests' send/recv bus bandwidth (src/sendrecv.cu ``SendRecvGetBw``:
busbw = algbw = bytes / seconds / 1e9, factor 1), per rank pair, with the time of the
slowest receiving rank of the edge (``all_reduce_perf -a 3``'s choice: the slowest rank
bounds the job). Each edge keeps its best repeat: load on the machine only ever slows a
transfer down, and a rate limit caps every repeat, so the best one is the link's.

A unit's *out* figure is the best of its outbound edges, its *in* figure the best of its
inbound ones: one slow peer does not make a unit slow, only a unit slow on all of its
edges one way is. With two units, the one edge each way is both one unit's out and the
other's in, so only *out* is judged: a slow direction names its sender.
"""

import statistics

from ..shared.units import gbs

# A unit is slow when its figure is below its peers' median divided by this. A real
# degraded link (a NIC at 25 or 10 of 100 Gb/s, a port at 1 of 25) is 4x to 100x down.
# Healthy links of this 2-core test machine under a load of 8-13 gave best-of-3 figures
# up to 2.6x apart run to run (12 runs of 2 hosts: docs/nodes-slow.md); 3 was too close.
SLOW_RATIO = 4.0
# Below its peers' median divided by this, a unit is suspect: measured again before the
# judgement (more repeats, each edge still its best one).
SUSPECT_RATIO = 2.0
# nccl-tests fails NCCL_TESTS_MIN_BW when the average busbw is below 90 % of it
# (src/common.cu: ``bw[0] < check_avg_bw*(0.9)``): the same slack here.
MIN_BUSBW_SLACK = 0.9


def edge_rates(units, phase_list, times, nbytes):
    """{(sender unit, receiver unit): best GB/s}. ``times[rank][i]``: the rank's seconds
    in step i = repeat * len(phase_list) + phase (receivers' entries are read)."""
    best = {}
    steps = len(times[0]) if times else 0
    for i in range(steps):
        for a, b in phase_list[i % len(phase_list)]:
            receivers = units[b][:len(units[a])]
            seconds = max(times[r][i] for r in receivers)
            if seconds > 0:
                rate = nbytes / seconds / 1e9
                best[(a, b)] = max(best.get((a, b), 0.0), rate)
    return best


def unit_rates(n_units, rates):
    """([out GB/s per unit], [in GB/s per unit]): the best edge each way."""
    out, inb = [0.0] * n_units, [0.0] * n_units
    for (a, b), rate in rates.items():
        out[a] = max(out[a], rate)
        inb[b] = max(inb[b], rate)
    return out, inb


def directions(n_units):
    return ("out",) if n_units == 2 else ("out", "in")


def judge(names, out, inb, min_busbw=None, by_peers=True, ratio=SLOW_RATIO):
    """[(unit, direction, figure, why)] for every figure below its peers' median /
    ``ratio`` or below ``min_busbw``, why being ("peers", median) or ("min", min_busbw)."""
    figures = {"out": out, "in": inb}
    slow = []
    for u in range(len(names)):
        for d in directions(len(names)):
            mine = figures[d][u]
            peers = [f for v, f in enumerate(figures[d]) if v != u]
            median = statistics.median(peers) if peers else None
            if by_peers and median and mine < median / ratio:
                slow.append((u, d, mine, ("peers", median)))
            elif min_busbw is not None and mine < min_busbw * MIN_BUSBW_SLACK:
                slow.append((u, d, mine, ("min", min_busbw)))
    return slow


VERB = {"out": "sends", "in": "receives"}


def summary(names, slow):
    """'node2 sends at 0.0031 GB/s, 390x below its peers' median 1.2 GB/s', one clause
    per unit slow against its peers, then those below --min-busbw in one clause."""
    parts, below = [], []
    for u, d, mine, (why, ref) in slow:
        if why == "peers":
            parts.append("%s %s at %s GB/s, %.0fx below its peers' median %s GB/s" % (
                names[u], VERB[d], gbs(mine), ref / mine if mine else float("inf"),
                gbs(ref)))
        else:
            below.append("%s %s at %s" % (names[u], VERB[d], gbs(mine)))
    if below:
        parts.append("%s GB/s: below --min-busbw %s GB/s" % (", ".join(below),
                                                           gbs(slow[-1][3][1])))
    return "; ".join(parts)


def table(names, out, inb):
    """'node1 0.41, node2 0.39' (out), or 'node1 0.41/0.39, ...' (out/in) from 3 units."""
    if len(names) == 2:
        return ", ".join("%s %s" % (n, gbs(o)) for n, o in zip(names, out))
    return ", ".join("%s %s/%s" % (n, gbs(o), gbs(i)) for n, o, i in zip(names, out, inb))
