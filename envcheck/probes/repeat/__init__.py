"""repeat: the link that fails one time in twenty, named (``--repeat N``, ``--for TIME``).

Real failure: a host whose NIC, cable or switch port drops a packet now and then passes
every single check (TCP resends what was lost), and training still slows down or times
out: a small collective whose only packet was lost waits a retransmission timeout
(200 ms at least on Linux) before it goes on, and a job of thousands of steps meets it
every few steps. nccl-tests and DCGM's diagnostics repeat their tests for this reason
(``nccl-tests -n``/``--iters``, ``dcgmi diag -r 3``). Rounds, each with its own timeout:

- ``collectives``: the collectives probe, every round: how often each of its checks
  failed, per host (one wrong number is a failure);
- ``bandwidth``: the bandwidth probe, every round: per host the best, median and worst
  send/recv busbw, and how often ``per_host`` failed there (in a tenth of the rounds, and
  twice at least, fails it here);
- ``latency``: small round trips between hosts (``pingpong.py``), ``PINGS`` per pair
  and round: per host the best, median and worst, and the stalls; a host whose every
  pair stalls, and more often than the other pairs, fails (``stats.py``).

The rounds: ``--repeat N`` (the plan option ``repeat``: ``{"rounds": N}``), or ``--for
DURATION`` (``{"seconds": S}``: rank 0 decides when to stop, after a round). See
docs/intermittent.md.
"""

PINGS = 100  # timed round trips per pair and round

ADVICE_STALL = (
    "%(host)s's link loses packets now and then: check its NIC's drop and error "
    "counters (ethtool -S IFACE; ip -s link), its cable and switch port, and traffic "
    "rules left behind (tc qdisc show dev IFACE, iptables -L); until fixed, keep it out "
    "of jobs (envcheck report --failed-hosts FILE --drain-script FILE)")
ADVICE_TWO = ("; with 2 hosts either end may be the cause: a third host tells which")
ADVICE_COLLECTIVES = (
    "a collective that passes most rounds and fails some: suspect the transport or a "
    "flaky host (its NIC, memory); rerun with NCCL_DEBUG=INFO (GPU) or "
    "GLOO_SOCKET_IFNAME set to the right NIC")
ADVICE_BANDWIDTH = (
    "%(host)s is slower than its peers in some rounds and not in others: a link that "
    "renegotiates, errors or congestion on its port (ethtool -S IFACE); see the "
    "bandwidth probe's advice")


def _declared(name):
    """A built-in probe as the suite declares it: what this probe reruns."""
    from ..suite import SUITE

    return next(p for p in SUITE if p.name == name)


def _probe(name):
    """The function of the built-in probe ``name``, loaded as a rank loads any planned
    probe (its module and function from the suite), not imported by hand."""
    from ...worker.runtime import load_probe

    return load_probe(_declared(name).plan_entry())


def probe_repeat(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist

    rounds = _run_rounds(ctx, torch, dist)
    with ctx.check("collectives") as c:
        _collectives(ctx, c, rounds)
    with ctx.check("bandwidth") as c:
        _bandwidth(ctx, c, rounds)
    with ctx.check("latency") as c:
        _latency(ctx, c, rounds)


class _Rounds:
    """What the rounds left: the tally, the round trips, the hosts."""

    def __init__(self, tally, units, names, pair_times, done, seconds, one_host=False):
        self.tally, self.units, self.names = tally, units, names
        self.pair_times, self.done, self.seconds = pair_times, done, seconds
        self.one_host = one_host


def _run_rounds(ctx, torch, dist):
    import time

    from ...core import repeat as spec
    from ...worker.gather import all_gather_strings
    from ..shared import schedule
    from . import pingpong
    from .rounds import Tally

    opt = ctx.options.get(spec.OPTION) or {"rounds": spec.DEFAULT_ROUNDS}
    hosts = all_gather_strings(ctx, ctx.host)
    units, names = schedule.units_of(hosts)
    phase_list = pingpong.phases(pingpong.pairs(len(units)))
    tally, pair_times, done, seconds = Tally(), {}, 0, []
    t0 = time.monotonic()
    while True:
        # Each round is timed afresh by the watchdog (core/phases: "round").
        ctx.records.write("round", probe=ctx.probe, round=done + 1)
        r0 = time.monotonic()
        tally.run(ctx, "collectives", _probe("collectives"))
        tally.run(ctx, "bandwidth", _probe("bandwidth"))
        if phase_list:
            times = pingpong.run(torch, dist, ctx, units, phase_list, PINGS)
            for pair, ts in pingpong.by_pair(units, phase_list, PINGS, times).items():
                pair_times.setdefault(pair, []).extend(ts)
        done += 1
        seconds.append(time.monotonic() - r0)
        if "rounds" in opt:
            if done >= opt["rounds"]:
                break
            continue
        more = torch.tensor([int(time.monotonic() - t0 < opt["seconds"])],
                            dtype=torch.int64, device=ctx.device)
        dist.broadcast(more, src=0)  # rank 0's clock decides, for every rank alike
        if not int(more.item()):
            break
    return _Rounds(tally, units, names, pair_times, done, seconds,
                   one_host=len(set(hosts)) == 1)


def _host_of(rounds):
    """rank -> its unit's name."""
    return {r: rounds.names[u] for u, ranks in enumerate(rounds.units) for r in ranks}


def _per_host(ctx, rounds, ids):
    """{id: {host: rounds failed}} over every rank (a host's figure: its worst rank)."""
    from ...worker.gather import all_gather_ints

    gathered = all_gather_ints(ctx, [rounds.tally.failed(i) for i in ids])
    host_of = _host_of(rounds)
    out = {i: {} for i in ids}
    for rank, counts in enumerate(gathered):
        host = host_of.get(rank, ctx.host)
        for i, n in zip(ids, counts):
            out[i][host] = max(out[i].get(host, 0), n)
    return out


def _rounds_word(n):
    return "%d round%s" % (n, "" if n == 1 else "s")


def _collectives(ctx, c, rounds):
    COLL = _declared("collectives").checks
    from . import stats

    ids = ["collectives.%s" % k for k in COLL] + ["collectives.run"]
    failed = _per_host(ctx, rounds, ids)
    mine = {i.split(".", 1)[1]: rounds.tally.failed(i) for i in ids}
    times = {k: stats.spread([r["seconds"] for r in rounds.tally.results.get(
        "collectives.%s" % k, ())]) for k in COLL if k != "init"}
    c.data = {"rounds": rounds.done,
              "failed": {i.split(".", 1)[1]: f for i, f in failed.items()},
              "seconds": times}
    bad = ["%s in %d of %d on %s" % (i.split(".", 1)[1], n, rounds.done, host)
           for i in ids for host, n in sorted(failed[i].items()) if n]
    if bad:
        c.detail = "%s failed: %s" % (_rounds_word(rounds.done), "; ".join(bad))
        if any(mine.values()):
            first = next(r["detail"] for i in ids for r in rounds.tally.results.get(i, ())
                         if r["outcome"] == "failed")
            c.fail("%s (here: %s)" % (c.detail, first), advice=ADVICE_COLLECTIVES)
        return
    ar = times.get("all_reduce")
    c.detail = "%s, every check passed every round" % _rounds_word(rounds.done)
    if ar:
        c.detail += "; all_reduce ms best/median/worst %s/%s/%s" % (
            stats.ms(ar["best"]), stats.ms(ar["median"]), stats.ms(ar["worst"]))


def _bandwidth(ctx, c, rounds):
    from ..shared.units import gbs
    from . import stats

    results = rounds.tally.results.get("bandwidth.per_host", [])
    figures = [r["data"] for r in results if r["outcome"] != "skipped" and r["data"]]
    if not figures:
        why = next((r["detail"] for r in results if r["outcome"] == "skipped"), "not run")
        c.skip("%s: %s" % (_rounds_word(rounds.done), why))
    names = figures[0]["names"]
    out = {n: stats.spread([f["out_gbs"][i] for f in figures if f["names"] == names],
                           larger_is_better=True) for i, n in enumerate(names)}
    inb = {n: stats.spread([f["in_gbs"][i] for f in figures if f["names"] == names],
                           larger_is_better=True) for i, n in enumerate(names)}
    failed = _per_host(ctx, rounds, ["bandwidth.per_host", "bandwidth.run"])
    per_host = {n: max(failed["bandwidth.per_host"].get(n, 0),
                       failed["bandwidth.run"].get(n, 0)) for n in names}
    c.data = {"rounds": rounds.done, "unit": figures[0].get("unit"), "names": names,
              "out_gbs": out, "in_gbs": inb, "failed": per_host}
    table = ", ".join("%s %s" % (n, "/".join(gbs(out[n][k]) for k in ("best", "median",
                                                                         "worst")))
                      for n in names)
    c.detail = "%s, send/recv busbw sent per host, GB/s best/median/worst: %s" % (
        _rounds_word(rounds.done), table)
    bad = [n for n in names if stats.flaky(per_host[n], rounds.done)]
    noted = ["%s in %d" % (n, per_host[n]) for n in names if per_host[n]]
    if noted:
        c.detail += "; per_host failed on %s of %d rounds" % (", ".join(noted), rounds.done)
    if ctx.host in bad or (ctx.rank in _ranks_of(rounds, bad)):
        c.fail(c.detail, advice=ADVICE_BANDWIDTH % {"host": ctx.host})


def _ranks_of(rounds, names):
    return {r for u, ranks in enumerate(rounds.units) if rounds.names[u] in names
            for r in ranks}


def _latency(ctx, c, rounds):
    from . import stats

    if not rounds.pair_times:
        c.skip("1 rank: no pair to time (run 2 ranks or more)")
    all_times = [t for ts in rounds.pair_times.values() for t in ts]
    threshold = stats.stall_threshold(all_times)
    counts = stats.stall_counts(rounds.pair_times, threshold)
    names = rounds.names
    per_unit = {names[u]: stats.spread([t for p, ts in rounds.pair_times.items() if u in p
                                        for t in ts]) for u in range(len(names))}
    stalling = stats.stalling(len(names), counts)
    pair_name = {p: "%s-%s" % (names[p[0]], names[p[1]]) for p in counts}
    c.data = {"rounds": rounds.done, "pings": PINGS,
              "threshold_s": threshold, "names": names,
              "seconds": per_unit,
              "pairs": [{"a": names[a], "b": names[b], "stalls": s, "round_trips": n}
                        for (a, b), (s, n) in sorted(counts.items())],
              "stalling": [names[u] for u in stalling]}
    table = ", ".join("%s %s/%s/%s" % (n, stats.ms(s["best"]), stats.ms(s["median"]),
                                      stats.ms(s["worst"]))
                      for n, s in per_unit.items() if s)
    # the pairs that stalled most first: what a drain reason cut at 200 characters keeps
    order = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    stalls = ", ".join("%s %d" % (pair_name[p], s) for p, (s, _) in order)
    n = max(len(ts) for ts in rounds.pair_times.values())
    figures = "round trips of %s ms or more, of %d per pair: %s; ms best/median/worst: " \
              "%s" % (stats.ms(threshold), n, stalls, table)
    if not stalling:
        c.detail = "%s, none stalls: %s" % (_rounds_word(rounds.done), figures)
        return
    if rounds.one_host:
        # Ranks of one host share no link (loopback, shared memory): a stall between them
        # is the machine's own scheduling (a busy CPU), never a lost packet. Reported,
        # not judged, as the bandwidth rounds are not run there without --min-busbw.
        c.data["stalling"] = []
        c.detail = "%s on one host, not judged: %s (no link between its ranks: a stall " \
                   "here is the machine's own scheduling)" % (_rounds_word(rounds.done), figures)
        return
    named = [names[u] for u in stalling]
    c.detail = "%s stall%s: %s" % (" and ".join(named) if len(named) < 3 else
                                   ", ".join(named), "" if len(named) > 1 else "s", figures)
    if ctx.rank in _ranks_of(rounds, named):
        advice = ADVICE_STALL % {"host": ctx.host}
        if len(names) == 2:
            advice += ADVICE_TWO
        c.fail(c.detail, advice=advice)

