"""Small round trips between hosts, timed: what a lost packet costs a small collective.

TCP hides a lost packet from a stream (a later one's acknowledgement tells the sender to
resend at once), but not from a message that is the only one in flight, as a small
collective's is: its sender waits a retransmission timeout (Linux: 200 ms at least,
``TCP_RTO_MIN``) before it resends. Round trips of one element are such messages. A
host whose link drops packets now and then stalls a few of them on every one of its
links; a loaded machine stalls them too, but not on one host's links alone.

Units and pairs: the bandwidth probe's units (``shared/schedule.py``: hosts, or ranks
on one host); each unit pairs with the units one and two places on (a third host tells
which end of a stalling pair is the bad one). In a phase no unit is in two pairs; the
first rank of the pair's lower unit times every round trip with the other's first rank.
"""

import time

from ..shared import schedule


def pairs(n_units):
    """Unordered pairs (a, b), a < b, from the ring's edges (``schedule.edges``)."""
    return list(dict.fromkeys(tuple(sorted(e)) for e in schedule.edges(n_units)))


def phases(pair_list):
    """The pairs grouped so that no unit is in two pairs of one phase (the bandwidth
    schedule's rule)."""
    return schedule.group(pair_list)


def run(torch, dist, ctx, units, phase_list, pings):
    """``pings`` timed round trips per pair (after one untimed one). Returns
    times[rank][phase * pings + k]: the seconds of round trip k of the rank's pair in
    that phase, on the rank that timed it (0 elsewhere), gathered to every rank."""
    one = torch.zeros(1, dtype=torch.float32, device=ctx.device)
    mine = []
    for phase in phase_list:
        role = None
        for a, b in phase:
            if ctx.rank == units[a][0]:
                role = ("ping", units[b][0])
            elif ctx.rank == units[b][0]:
                role = ("pong", units[a][0])
        dist.barrier()
        times = [0.0] * pings
        if role is not None:
            for k in range(-1, pings):  # k = -1: untimed (NCCL opens the pair's link)
                t0 = time.perf_counter()
                if role[0] == "ping":
                    dist.send(one, role[1])
                    dist.recv(one, role[1])
                else:
                    dist.recv(one, role[1])
                    dist.send(one, role[1])
                if ctx.device.type == "cuda":
                    torch.cuda.synchronize(ctx.device)
                if k >= 0 and role[0] == "ping":
                    times[k] = time.perf_counter() - t0
        mine += times
    buf = torch.tensor(mine or [0.0], dtype=torch.float64, device=ctx.device)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [t.cpu().tolist() for t in out]


def by_pair(units, phase_list, pings, times):
    """{(a, b): [seconds, ...]} from one round's gathered ``times``."""
    out = {}
    for i, phase in enumerate(phase_list):
        for a, b in phase:
            row = times[units[a][0]]
            out.setdefault((a, b), []).extend(row[i * pings:(i + 1) * pings])
    return out
