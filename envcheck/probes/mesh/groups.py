"""The mesh's placement and speed, judged from what every rank gathered: pure.

Placement: a TP or EP group that spans hosts runs its collectives (every layer's
all-gather, every MoE layer's all-to-all) over the network, about ten times slower than
inside a node; when another mesh order keeps every such group inside one host, say which
(``core.mesh.better_order``).

Speed: each group's all_reduce busbw (nccl-tests' all_reduce busbw: bytes * 2(n-1)/n /
s), reported. Groups are not judged against each other: one inside a host runs over
loopback, one across hosts over a link, and the first is rightly faster. What is judged
is the links the groups cross: every ordered host pair some group spans, timed alone
(send/recv busbw, the receiver's clock); a link below the median of the others divided
by SLOW_RATIO is slow and names its sender, as the bandwidth probe names a host
(probes/bandwidth/judge.py; with 2 hosts the receiver is the other suspect), and the
slowest group over it. On one host there is no link: figures only.
"""

import statistics

from ...core import mesh as mesh_mod
from ...core.text import rank_numbers

SLOW_RATIO = 4.0
# Below the others' median / this, a link is suspect: timed again before the judgement.
SUSPECT_RATIO = 2.0


def busbw(nbytes, n, seconds):
    """nccl-tests' all_reduce bus bandwidth, GB/s."""
    if not seconds or n < 2:
        return 0.0
    return nbytes * 2.0 * (n - 1) / n / seconds / 1e9


def group_name(dim, group):
    return "%s group [%s]" % (dim, ",".join(str(r) for r in group))


def spans(layout, hosts):
    """{dim: [(group, [host, ...]), ...]} for every active dimension."""
    return {dim: [(g, mesh_mod.hosts_of(g, hosts)) for g in layout.groups(dim)]
            for dim in layout.active}


def placement(layout, hosts):
    """[(dim, crossing groups, better order or None)] for TP/EP groups that span hosts."""
    out = []
    for dim, groups in spans(layout, hosts).items():
        if dim not in mesh_mod.INSIDE_NODE:
            continue
        crossing = [(g, h) for g, h in groups if len(h) > 1]
        if crossing:
            out.append((dim, crossing, mesh_mod.better_order(layout, dim, hosts)))
    return out


def span_text(layout, hosts):
    """'tp: [0,1] node1, [2,3] node2; dp_shard: [0,2] node1+node2, ...'."""
    parts = []
    for dim, groups in spans(layout, hosts).items():
        shown = ", ".join("[%s] %s" % (rank_numbers(g), "+".join(h)) for g, h in groups[:4])
        more = " (+%d more)" % (len(groups) - 4) if len(groups) > 4 else ""
        parts.append("%s: %s%s" % (dim, shown, more))
    return "; ".join(parts)


def crossed_pairs(layout, hosts):
    """(sender rank, receiver rank) for every ordered pair of hosts some group spans, once
    per host pair (the first group's first rank on each host), in a fixed order."""
    seen, out = set(), []
    for dim in layout.active:
        for group in layout.groups(dim):
            first = {}
            for r in group:
                first.setdefault(hosts[r], r)
            for a, ra in first.items():
                for b, rb in first.items():
                    if a != b and (a, b) not in seen:
                        seen.add((a, b))
                        out.append((ra, rb))
    return out


def slow_edges(edges, ratio=SLOW_RATIO):
    """[(sender, receiver, GB/s, median)] of links below the median of the others /
    ``ratio``, slowest first. ``edges``: [(sender host, receiver host, GB/s)]."""
    slow = []
    for i, (a, b, rate) in enumerate(edges):
        others = [r for j, (_, _, r) in enumerate(edges) if j != i]
        median = statistics.median(others) if others else None
        if median and rate < median / ratio:
            slow.append((a, b, rate, median))
    return sorted(slow, key=lambda e: e[2] / e[3])


def groups_over(layout, hosts, a, b):
    """[(dim, group)] of the groups that span both hosts ``a`` and ``b``."""
    return [(dim, g) for dim in layout.active for g in layout.groups(dim)
            if {a, b} <= set(mesh_mod.hosts_of(g, hosts))]
