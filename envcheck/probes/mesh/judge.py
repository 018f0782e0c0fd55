"""The mesh's placement and speed, judged from what every rank gathered: pure.

Placement: a TP or EP group that spans hosts runs its collectives (every layer's
all-gather, every MoE layer's all-to-all) over the network, about ten times slower than
inside a node; when another mesh order keeps every such group inside one host, say which
(``core.mesh.better_order``).

Speed: each group's all_reduce busbw (nccl-tests' all_reduce busbw: bytes * 2(n-1)/n /
s); a group below the median of every group of the mesh divided by SLOW_RATIO is slow,
as the bandwidth probe judges a host against its peers (probes/bandwidth/judge.py). On
one host there is no network to blame: figures only.
"""

import statistics

from ...core import mesh as mesh_mod
from ...core.text import rank_numbers

SLOW_RATIO = 4.0


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


def slow_groups(figures, ratio=SLOW_RATIO):
    """[(dim, group, gbs, median)] below the median of every other group / ratio.
    ``figures``: [(dim, group, gbs)]."""
    slow = []
    for i, (dim, group, gbs) in enumerate(figures):
        others = [f for j, (_, _, f) in enumerate(figures) if j != i]
        if not others:
            continue
        median = statistics.median(others)
        if median and gbs < median / ratio:
            slow.append((dim, group, gbs, median))
    return slow


def host_pairs(group, hosts):
    """(sender rank, receiver rank) for each ordered pair of the group's hosts (the first
    rank of each host): the edges that name the slow link."""
    first = {}
    for r in group:
        first.setdefault(hosts[r], r)
    reps = list(first.values())
    return [(a, b) for a in reps for b in reps if a != b]
