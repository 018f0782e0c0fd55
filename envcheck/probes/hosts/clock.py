"""How far apart the hosts' wall clocks are, with the round trip bounding the error.

After a barrier every rank reads its wall clock (``time.time()``, CLOCK_REALTIME: what
logs, timeouts and torchrun's rendezvous heartbeats read) just before (``a``) and just
after (``b``) a one-element all_reduce, ``ROUNDS`` times. No rank leaves an all_reduce
before every rank has entered it, so at one instant every rank's clock read between its
own ``a`` and ``b``. Rank i's offset from rank 0 is then

    ((a_i + b_i) - (a_0 + b_0)) / 2  ±  ((b_i - a_i) + (b_0 - a_0)) / 2

as NTP bounds its offset by half the round trip. Of the rounds, the one with the smallest
bound is kept (the least delayed exchange, as NTP's clock filter keeps), and per host its
rank with the smallest bound.

The reference is the hosts' median offset (three hosts or more: one wrong clock cannot
move it), and with two hosts rank 0's host: two clocks that disagree cannot tell which
one is wrong, and the report says so. A host is off when even the most favourable reading
of the bound puts it more than ``THRESHOLD_S`` away.
"""

import time

ROUNDS = 5
# awslabs/awsome-distributed-ai#180: "In rare cases, PyTorch will timeout due to drift in
# system clock across nodes"; the check proposed there: every node's date "within 1 sec
# of each other". NTP or chrony keep healthy hosts within milliseconds.
THRESHOLD_S = 1.0
SOURCE = "awslabs/awsome-distributed-ai#180"
ADVICE = ("synchronise the clocks: run chrony or ntpd (or systemd-timesyncd) on every host "
          "and check it is in sync there: chronyc tracking ('System time' is the offset) "
          "or timedatectl ('System clock synchronized: yes')")


def readings(ctx):
    """[(a, b), ...] of this rank, ROUNDS of them, after a barrier."""
    import torch
    import torch.distributed as dist

    dist.barrier()
    t = torch.zeros(1, device=ctx.device)
    out = []
    for _ in range(ROUNDS):
        a = time.time()
        dist.all_reduce(t)
        if t.device.type == "cuda":
            torch.cuda.synchronize(t.device)
        b = time.time()
        out.append((a, b))
    return out


def offsets(all_readings):
    """[(offset, bound)] per rank, relative to rank 0: the round with the smallest bound."""
    ref = all_readings[0]
    out = []
    for mine in all_readings:
        best = min(
            ((((a + b) - (a0 + b0)) / 2, ((b - a) + (b0 - a0)) / 2)
             for (a, b), (a0, b0) in zip(mine, ref)), key=lambda x: x[1])
        out.append(best)
    return out


def by_host(rank_offsets, hosts):
    """{host: (offset, bound)}: each host's rank with the smallest bound, in rank order."""
    out = {}
    for rank, (offset, bound) in enumerate(rank_offsets):
        h = hosts[rank]
        if h not in out or bound < out[h][1]:
            out[h] = (offset, bound)
    return out


def judge(host_offsets, first_host):
    """(reference description, {host: (offset from reference, bound)}, [odd hosts])."""
    names = list(host_offsets)
    if len(names) >= 3:
        ordered = sorted(host_offsets[h][0] for h in names)
        mid = len(ordered) // 2
        ref = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        where = "the median of %d hosts" % len(names)
    else:
        ref = host_offsets[first_host][0]
        where = first_host
    rel = {h: (o - ref, b) for h, (o, b) in host_offsets.items()}
    odd = [h for h in names if abs(rel[h][0]) - rel[h][1] > THRESHOLD_S]
    return where, rel, odd


def describe(offset, bound):
    return "%+.3f s ± %.3f" % (offset, bound)
