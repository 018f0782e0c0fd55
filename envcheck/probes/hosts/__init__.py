"""hosts: what differs between the hosts of a job, and the limits each host imposes.

Real failures, each of which a job meets only after its rendezvous, as a hang or a crash
far from its cause (issue #23; docs/nodes-skew.md, nodes-clock.md, nodes-limits.md):

- ``skew``: another torch, NCCL, CUDA, driver, Python or numpy on one host, or NCCL_* /
  GLOO_* / TORCH_* variables that one host sets differently (NVIDIA/nccl#354: "could it
  be possible that you have different NCCL versions on different nodes?"; nccl#234: IB
  on one node, sockets on another, and ``ncclCommInitRank`` hangs). Every difference is a
  finding the matrix judges (``hosts.toml``): one that breaks a job fails the run, one
  nobody has shown to matter is a warning marked unconfirmed. (``skew.py``)
- ``clock``: wall clocks more than a second apart (awslabs/awsome-distributed-ai#180:
  "PyTorch will timeout due to drift in system clock across nodes"), measured after a
  barrier with the round trip bounding the error. Needs two hosts. (``clock.py``)
- ``shm``, ``memlock``, ``nofile``: /dev/shm size and free space, the locked-memory and
  open-files limits, against what NCCL's SHM transport, RDMA and DataLoader workers need;
  a limit no source gives a floor for is a warning. (``rlimits.py``)

Only the ranks on an odd host fail, so that the report names that host ("ranks 2–3 on
node2: ..."); the others pass, saying what they compared.
"""

from . import clock, rlimits, skew
from .exchange import all_gather_json


def probe_hosts(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch

    mine = skew.facts(torch)
    stamps = None
    # One exchange carries the facts; the clock's readings need their own collectives.
    everyone = all_gather_json(ctx, {"host": ctx.host, "facts": mine})
    hosts = [e["host"] for e in everyone]
    with ctx.check("skew") as c:
        _skew(ctx, c, torch, [e["facts"] for e in everyone], hosts)
    with ctx.check("clock") as c:
        if len(set(hosts)) > 1:
            stamps = clock.readings(ctx)
            stamps = all_gather_json(ctx, stamps)
        _clock(ctx, c, hosts, stamps)
    for name, measure, advice in (("shm", rlimits.shm, rlimits.SHM_ADVICE),
                                  ("memlock", rlimits.memlock, rlimits.MEMLOCK_ADVICE),
                                  ("nofile", rlimits.nofile, rlimits.NOFILE_ADVICE)):
        with ctx.check(name) as c:
            problem, kind, data = measure(ctx.host)
            c.data = {k: v for k, v in data.items() if k != "said"}
            if problem:
                c.data["kind"] = kind
                c.fail(problem, advice=advice)
            c.detail = data["said"]


def _public(facts):
    """A rank's facts as a record may hold them: no digest of a secret."""
    out = dict(facts)
    out["env"] = {k: v.split("\0")[0] for k, v in facts["env"].items()}
    return out


def _skew(ctx, c, torch, all_facts, hosts):
    findings, odd = skew.compare(all_facts, hosts)
    c.data = {"facts": _public(all_facts[ctx.rank])}
    absent = sorted({r for key, _ in skew.FIELDS if all_facts[ctx.rank].get(key) is None
                     for r in [skew.absent_reason(key, torch)] if r})
    f = all_facts[ctx.rank]
    compared = "torch %s (git %s), NCCL %s, Python %s, numpy %s, %d NCCL_*/GLOO_*/TORCH_* " \
        "variable(s)" % (f["torch"], (f["torch_git"] or "?")[:10], f["nccl"] or "none",
                         f["python"], f["numpy"] or "none", len(f["env"]))
    if ctx.rank in odd:
        c.data["findings"] = findings
        c.fail("; ".join(findings), advice=skew.advice(findings, all_facts, hosts, odd))
    n_hosts = len(set(hosts))
    c.detail = "%d rank(s) on %d host(s) agree: %s" % (ctx.world_size, n_hosts, compared)
    if findings:
        c.detail = "%d difference(s) on %s; this rank has the majority's" % (
            len(findings), ", ".join(dict.fromkeys(hosts[r] for r in odd)))
    if absent:
        c.detail += " (%s)" % "; ".join(absent)


def _clock(ctx, c, hosts, stamps):
    names = list(dict.fromkeys(hosts))
    if stamps is None:
        c.skip("all %d rank(s) run on %s: one clock, no skew to measure (it needs ranks "
               "on several hosts)" % (ctx.world_size, names[0]))
    per_host = clock.by_host(clock.offsets(stamps), hosts)
    where, rel, odd = clock.judge(per_host, hosts[0])
    c.data = {"reference": where, "threshold_s": clock.THRESHOLD_S, "rounds": clock.ROUNDS,
              "offsets": {h: {"offset_s": round(o, 6), "bound_s": round(b, 6)}
                          for h, (o, b) in rel.items()}}
    spread = ", ".join("%s %s" % (h, clock.describe(*rel[h])) for h in names)
    if ctx.host in odd:
        off, bound = rel[ctx.host]
        two = len(names) == 2
        c.fail("the clock on %s is %s from %s, more than %g s (%s)%s" % (
            ctx.host, clock.describe(off, bound), where, clock.THRESHOLD_S, clock.SOURCE,
            ": with two hosts envcheck cannot tell which clock is wrong, check both"
            if two else ""), advice=clock.ADVICE)
    c.detail = "clocks within %g s of %s: %s" % (clock.THRESHOLD_S, where, spread)
