"""bandwidth: the slow host, named: send/recv bus bandwidth per host, against its peers.

Real failure: one host with a degraded link (a NIC that negotiated 10 of 100 Gb/s, a
bad cable, a port with errors, traffic shaping left behind) slows every collective of
the job to its pace. Training sees one job-wide slowdown and no culprit, and a single
bandwidth figure (``nccl.bandwidth``, nccl-tests' all_reduce busbw) cannot say whether
it is bad, or which host it comes from. Check:

- ``per_host``: each host sends to the next host (and, from 3 hosts, to the one after),
  nccl-tests' sendrecv_perf ring lifted from ranks to hosts (``schedule.py``); a
  receiver times each direction alone; a host's figure is its best edge each way
  (``judge.py``). A host whose figure is below a quarter of its peers' median fails, on
  that host's ranks, and so does one below ``--min-busbw`` (nccl-tests'
  ``NCCL_TESTS_MIN_BW``: below 90 % of it). With 2 hosts each direction is judged by
  its sender; on 1 host there is no host to compare: each rank is measured and judged
  against ``--min-busbw`` when it is given, else the check is skipped at no cost.

The figure is nccl-tests' send/recv busbw (github.com/NVIDIA/nccl-tests,
doc/PERFORMANCE.md; src/sendrecv.cu: busbw = algbw = bytes / s, in GB/s = 1e9 B/s).
Only torch.distributed send/recv is used: on GPU ranks (backend nccl) it is NCCL's P2P
over the hosts' network, on CPU gloo's TCP. Why a probe of its own rather than a check
of ``nccl``: it judges the network between hosts on any backend (``nccl``'s checks are
NCCL's and skip without it), costs its own time under its own timeout (a rate-limited
link makes it slow, not the NCCL checks), and ``-p bandwidth`` runs it alone; the
formulas and the device handling stay ``nccl``'s (``probes/shared/units.py``).
"""

from ..shared.units import human_bytes

# Bytes per transfer and best-of repeats. CPU/gloo: 2 hosts x 2 ranks on a loaded
# 2-core machine must stay under 0.3 s for the whole check (docs/performance.md), and a
# link shaped to tens of Mbit/s must still finish in seconds. GPU/NCCL: nccl-tests'
# territory, large enough for the network's bandwidth rather than its latency.
CPU_BYTES, CPU_REPEATS = 1 << 20, 5
GPU_BYTES, GPU_REPEATS = 64 << 20, 5
# A host that looks suspect (judge.SUSPECT_RATIO) is measured again, up to this many
# rounds in all, before it is judged: a rate limit stays, a stall of a loaded machine
# does not (all ranks decide alike, from the same gathered figures).
ROUNDS = 3

ADVICE_PEERS = (
    "%(host)s's network is slower than its peers': check its link (ethtool IFACE: "
    "Speed; ethtool -S IFACE: errors, drops), traffic shaping (tc qdisc show dev IFACE), "
    "its cable and switch port; until fixed, keep it out of jobs (SLURM: scontrol update "
    "nodename=%(host)s state=drain reason=slow-link)")
ADVICE_TWO = ("; with 2 hosts a slow direction is named by its sender: %(peer)s's "
              "inbound link is the other suspect (a third host tells them apart)")
ADVICE_MIN = (
    "the network delivers less than --min-busbw: check that the job uses the fast "
    "fabric (NCCL_DEBUG=INFO prints NET/IB, not NET/Socket; NCCL_SOCKET_IFNAME, "
    "NCCL_IB_HCA; on CPU, GLOO_SOCKET_IFNAME), then each link's speed (ethtool IFACE)")


def probe_bandwidth(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist

    with ctx.check("per_host") as c:
        _per_host(ctx, c, torch, dist)


def _per_host(ctx, c, torch, dist):
    from ...core.text import rank_numbers
    from ...worker.gather import all_gather_strings
    from . import judge
    from ..shared import schedule

    if ctx.world_size == 1:
        c.skip("1 rank: nobody to send to (run 2 ranks or more)")
    gpu = ctx.device.type == "cuda"
    nbytes, repeats = (GPU_BYTES, GPU_REPEATS) if gpu else (CPU_BYTES, CPU_REPEATS)
    nbytes = int(ctx.options.get("bandwidth_bytes") or nbytes)
    min_busbw = ctx.options.get("min_busbw")
    if ctx.local_world_size == ctx.world_size and min_busbw is None:
        # Every rank on this host (the same answer on every rank): nothing to judge a
        # figure against, so no time spent (nccl.bandwidth has the host's all_reduce).
        c.skip("1 host: no other host to compare with; --min-busbw GB/S judges each "
               "rank's send/recv busbw here (nccl.bandwidth: this host's all_reduce)")
    hosts = all_gather_strings(ctx, ctx.host)
    units, names = schedule.units_of(hosts)
    one_host = len(set(hosts)) == 1
    # GPUs: every local rank pairs with its peer on the other host (each GPU's NIC rail).
    # CPU: gloo's TCP leaves by the host's one link whichever rank sends, so one pair per
    # host measures it, and the host's other ranks leave it the cores.
    senders = units if gpu else [u[:1] for u in units]
    rates, out, inb, slow, rounds, wrong = _measure(
        ctx, torch, dist, senders, names, nbytes, repeats, min_busbw, one_host)
    how = "%s, %s, best of %d" % (ctx.backend, human_bytes(nbytes), repeats * rounds)
    figures = "send/recv busbw per %s%s, GB/s: %s (%s)" % (
        "rank" if one_host else "host", "" if len(units) == 2 else " (out/in)",
        judge.table(names, out, inb), how)
    c.data = {"unit": "rank" if one_host else "host", "names": names,
              "out_gbs": out, "in_gbs": inb, "bytes": nbytes, "rounds": rounds,
              "repeats": repeats * rounds,
              "edges": [{"from": names[a], "to": names[b], "busbw_gbs": r}
                        for (a, b), r in sorted(rates.items())],
              "slow_ratio": judge.SLOW_RATIO, "min_busbw_gbs": min_busbw,
              "slow": [{"name": names[u], "direction": d, "busbw_gbs": f, "why": why[0],
                        "reference_gbs": why[1]} for u, d, f, why in slow]}
    if wrong:
        c.fail("%d of %d elements received were not what the sender sent" % (
            wrong, nbytes // 4), advice="the link corrupts data: check the NIC and cable "
                                        "(ethtool -S IFACE: CRC errors)")
    mine = next(u for u, ranks in enumerate(units) if ctx.rank in ranks)
    if slow:
        c.detail = "%s (%s)" % (judge.summary(names, slow), figures)
        if not one_host and len({s[0] for s in slow}) == len(units):
            # Every rank fails: say so, so that the report names every host (with one
            # failing, it names that one's ranks itself).
            c.detail = "ranks %s: %s" % (rank_numbers(range(ctx.world_size)), c.detail)
        bad = [s for s in slow if s[0] == mine]
        if bad:
            c.fail(c.detail, advice=_advice(names, bad))
        return
    c.detail = figures
    if one_host:
        c.detail += "; 1 host: no other host to compare with"
    else:
        c.detail += "; none below 1/%g of its peers' median" % judge.SLOW_RATIO
    if min_busbw is not None:
        c.detail += "; --min-busbw %s GB/s met" % judge.gbs(min_busbw)


def _measure(ctx, torch, dist, senders, names, nbytes, repeats, min_busbw, one_host):
    """Rounds of transfers until no unit is a suspect (or ROUNDS): (edge rates, out, in,
    slow, rounds, wrong elements received)."""
    from . import judge, measure
    from ..shared import schedule

    phase_list = schedule.phases(len(senders))
    times, wrong, rounds = [[] for _ in range(ctx.world_size)], 0, 0
    while True:
        more, bad = measure.run(torch, dist, ctx, senders, phase_list, nbytes, repeats,
                                warmup=rounds == 0)
        times = [t + m for t, m in zip(times, more)]
        wrong, rounds = wrong + bad, rounds + 1
        rates = judge.edge_rates(senders, phase_list, times, nbytes)
        out, inb = judge.unit_rates(len(senders), rates)
        verdict = [judge.judge(names, out, inb, min_busbw, by_peers=not one_host,
                               ratio=ratio)
                   for ratio in (judge.SLOW_RATIO, judge.SUSPECT_RATIO)]
        if not verdict[1] or rounds == ROUNDS:
            return rates, out, inb, verdict[0], rounds, wrong


def _advice(names, bad):
    parts = []
    for u, d, _, why in bad:
        if why[0] == "peers":
            text = ADVICE_PEERS % {"host": names[u]}
            if len(names) == 2:
                text += ADVICE_TWO % {"peer": names[1 - u]}
            parts.append(text)
        elif ADVICE_MIN not in parts:
            parts.append(ADVICE_MIN)
    return "; ".join(dict.fromkeys(parts))
