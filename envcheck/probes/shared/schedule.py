"""Who sends to whom, and when: computed alike on every rank from the ranks' host names.

A *unit* is what gets a figure of its own: a host when the ranks span several hosts, a
rank when they are all on one (then there is no host to compare, but ``--min-busbw``
still holds per rank). Units are numbered in the order of their first rank, so rank 0's
host is unit 0.

Each unit sends to the unit ``k`` places on, for ``k`` in ``shifts``: nccl-tests'
sendrecv_perf ring (rank r sends to r+1), lifted from ranks to hosts. One shift names
the sender of a slow direction only; a second shift (three hosts or more) gives every
unit two peers each way, so that a slow *receiving* link shows as one host slow on both
of its inbound edges, and a slow sending link as one host slow on both outbound edges.

Edges run in *phases*: within a phase no unit appears twice, so each unit either only
sends or only receives, and the receiver's clock times one direction of one link
(a rank that did both at once could not tell its inbound link from its outbound one).
Between two units, rank i of one pairs with rank i of the other (local rank i uses
the same NIC rail on every host), so all of a host's ranks load its link together.
"""


def units_of(hosts_by_rank):
    """[[rank, ...] per unit], names: hosts in order of their first rank; on one host,
    each rank its own unit, named 'rank R'."""
    order = list(dict.fromkeys(hosts_by_rank))
    if len(order) == 1:
        return [[r] for r in range(len(hosts_by_rank))], \
            ["rank %d" % r for r in range(len(hosts_by_rank))]
    return [[r for r, h in enumerate(hosts_by_rank) if h == host] for host in order], order


def shifts(n_units):
    """1 (the ring) for 2 units, 1 and 2 from 3 units on; none for 1."""
    return [k for k in (1, 2) if k < n_units]


def edges(n_units):
    """(sender unit, receiver unit) for every shift, in shift order."""
    return [(u, (u + k) % n_units) for k in shifts(n_units) for u in range(n_units)]


def phases(n_units):
    """The edges grouped so that no unit is in two edges of one phase (greedy, in edge
    order: the same on every rank). A ring needs 2 phases (3 when odd)."""
    return group(edges(n_units))


def group(pairs):
    """``pairs`` grouped so that no unit is in two pairs of one phase (greedy, in order:
    the same on every rank)."""
    out = []
    for a, b in pairs:
        for phase in out:
            if not any(x in (a, b) for edge in phase for x in edge):
                phase.append((a, b))
                break
        else:
            out.append([(a, b)])
    return out


def roles(units, phase):
    """rank -> ("send", peer rank) / ("recv", peer rank) in this phase; ranks of a unit
    with more ranks than its peer's sit it out."""
    out = {}
    for a, b in phase:
        for src, dst in zip(units[a], units[b]):
            out[src] = ("send", dst)
            out[dst] = ("recv", src)
    return out
