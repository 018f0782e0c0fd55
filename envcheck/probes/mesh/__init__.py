"""mesh: the job's own device mesh, built as the job builds it, checked group by group.

Real failure: large jobs train on a device mesh, not on the world, and their failures
live in its groups: an expert-parallel all_to_all that hangs on one pair of hosts, a
tensor-parallel group laid across the network instead of inside a node (ten times
slower), a pipeline send/recv between stages on hosts that cannot reach each other, a
degree product that does not match the world size (refused before any rank starts:
``core/mesh.py``). ``collectives`` checks the world group only. Checks (docs/mesh.md):

- ``layout``: ``init_device_mesh`` with TorchTitan's dimension names and order (or
  ``--mesh-order``), every rank's groups as the layout says.
- ``pp``, ``dp_replicate``, ``dp_shard``, ``cp``, ``tp``, ``ep``: each dimension's
  collectives on every one of its groups at once, with the right values (``ops.py``);
  skipped where the layout gives that dimension degree 1. A group whose op does not
  complete by its deadline is a ``hang`` of that check, naming the group's ranks and
  hosts, with each of its ranks' stacks; the other groups and dimensions are still
  checked.
- ``placement``: which hosts each group spans; fails where a TP or EP group crosses
  hosts while another mesh order keeps it inside one, naming that order.
- ``speed``: every group's all_reduce busbw; across hosts, a group below a quarter of the
  mesh's median fails, naming the group and the slow host pair (``judge.py``).

On CPU the groups are gloo subgroups; on GPUs NCCL's (not observed on hardware yet).
"""

from ...core import mesh as mesh_mod
from ...core.text import rank_set
from . import groups as judge, ops

DIMENSIONS = mesh_mod.NAMES
# The share of the timeout one dimension's ops may take before its group is a hang: the
# rest leaves time to gather what every rank saw (each dimension is a "round": the
# supervisor's limit starts afresh with it).
GROUP_SHARE = 0.4
# Speed: bytes per all_reduce and best-of repeats (CPU: 2 hosts x 2 ranks on a loaded
# 2-core machine stay well under a second; a link shaped to tens of Mbit/s in seconds).
CPU_BYTES, GPU_BYTES, REPEATS = 256 << 10, 64 << 20, 3
# A link between hosts, timed alone: the bandwidth probe's sizes (probes/bandwidth), large
# enough on CPU that a scheduling stall of a loaded machine is not the figure.
LINK_CPU_BYTES, LINK_REPEATS = 1 << 20, 5
# Rounds of link timing while a link looks suspect (below half the others' median), as
# the bandwidth probe measures a suspect host again before judging it.
ROUNDS = 3

ADVICE_HANG = (
    "a %(dim)s group's collective never completed: look at the stacks of %(ranks)s (a "
    "rank that is not waiting in the collective is the cause)")
ADVICE_HOSTS = (
    "; check that %(hosts)s reach each other on the interface the job uses "
    "(GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME) and that no firewall blocks the ports "
    "between them")
ADVICE_PLACEMENT = (
    "build the mesh in the order %(order)s (outermost first, as init_device_mesh's "
    "mesh_dim_names), or launch so that each host's ranks are consecutive: %(dim)s groups "
    "then stay inside one host")
ADVICE_SLOW = (
    "%(host)s's link is slower than the rest of the mesh's: check it (ethtool IFACE: Speed; "
    "tc qdisc show dev IFACE); until fixed, keep it out of the job or out of its %(dim)s "
    "groups")


def probe_mesh(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist

    spec = ctx.options.get("mesh")
    if not spec:
        for name in ("layout",) + DIMENSIONS + ("placement", "speed"):
            with ctx.check(name) as c:
                c.skip("no layout given: --mesh dp_shard=2,tp=2 or --mesh-config FILE "
                       "(docs/mesh.md)")
        return
    layout = mesh_mod.Layout.from_dict(spec)
    state = {}
    with ctx.check("layout") as c:
        _layout(ctx, c, torch, dist, layout, state)
    for dim in DIMENSIONS:
        # A fresh limit per dimension (core/phases "round"), as --repeat's rounds have.
        ctx.records.write("round", probe=ctx.probe, round=dim)
        with ctx.check(dim) as c:
            _dimension(ctx, c, torch, dist, layout, dim, state)
    with ctx.check("placement") as c:
        _placement(ctx, c, layout, state)
    ctx.records.write("round", probe=ctx.probe, round="speed")
    with ctx.check("speed") as c:
        _speed(ctx, c, torch, dist, layout, state)


def _layout(ctx, c, torch, dist, layout, state):
    from ...worker.gather import all_gather_strings

    if ctx.world_size != layout.world_size:
        c.fail("the layout is for %d ranks, this job has %d" % (layout.world_size,
                                                               ctx.world_size))
    try:
        from torch.distributed.device_mesh import init_device_mesh
    except ImportError as exc:
        c.fail("torch %s has no torch.distributed.device_mesh.init_device_mesh (%s): "
               "the job's mesh cannot be built with it" % (torch.__version__, exc),
               advice="DeviceMesh and init_device_mesh arrived in torch 2.2: a job built on "
                      "them (TorchTitan, FSDP2, DTensor) needs torch >= 2.2")

    hosts = all_gather_strings(ctx, ctx.host)
    state["hosts"] = hosts
    dims = layout.mesh_dims()
    names = tuple(n for n, _ in dims)
    mesh = init_device_mesh(ctx.device.type, tuple(s for _, s in dims),
                            mesh_dim_names=names) if dims else None
    groups = {}
    for dim in layout.active:
        members = layout.members(dim, dims)
        mine = next(g for g in layout.groups(dim) if ctx.rank in g)
        groups[dim] = (_group(dist, mesh, layout, dim, members), mine)
        got = dist.get_process_group_ranks(groups[dim][0])
        if list(got) != list(mine):
            c.fail("%s: the mesh put rank %d in %s, the layout says %s" % (
                dim, ctx.rank, got, mine))
    state["groups"] = groups
    c.data = {"degrees": dict(layout.degrees), "mesh_dim_names": list(names),
              "mesh_shape": [s for _, s in dims], "source": layout.source,
              "groups": {d: layout.groups(d) for d in layout.active}, "hosts": hosts}
    c.detail = "%s from %s: init_device_mesh(%s, %s)" % (
        layout.shape(), layout.source, list(names), [s for _, s in dims])


def _group(dist, mesh, layout, dim, members):
    """The process group of ``dim``: the mesh's own dimension, or the flattened
    dimensions TorchTitan makes (``_flatten``; new_subgroups_by_enumeration where a
    release has no ``_flatten``)."""
    if len(members) == 1:
        return mesh.get_group(members[0])
    if hasattr(type(mesh), "_flatten"):
        return mesh[members]._flatten(mesh_dim_name=dim).get_group(dim)
    # Before _flatten, a mesh cannot be sliced by several names either (2.2: KeyError
    # "Mesh dimension '(...)' does not exist", seen by the release sweep).
    group, _ = dist.new_subgroups_by_enumeration(layout.groups(dim))
    return group


def _dimension(ctx, c, torch, dist, layout, dim, state):
    import time

    from ...worker.gather import all_gather_ints

    if layout.degree(dim) == 1:
        c.skip("degree 1 in this layout (%s): no %s group" % (layout.shape(), dim))
    if "groups" not in state:
        c.skip("the mesh was not built (mesh.layout)")
    group, mine = state["groups"][dim]
    hosts = state["hosts"]
    start = time.monotonic()
    deadline = start + GROUP_SHARE * ctx.timeout
    stacks = _StackAt(deadline - 0.2)
    stalled = error = None
    checked, skipped, entered, seconds = [], {}, 0.0, 0.0
    try:
        checked, skipped, entered, seconds = ops.run(torch, dist, ctx, dim, group, mine,
                                                     start, deadline)
    except ops.Stalled as exc:
        stalled, entered = exc.op, exc.entered
    except AssertionError as exc:
        error = str(exc)
    finally:
        stacks.cancel()
    # What every rank saw: stalled, when it reached its first op (ms), failed: the same
    # judgement on every rank.
    seen = all_gather_ints(ctx, [int(bool(stalled)), int(entered * 1000), int(bool(error))])
    gbs = None
    if not any(s[0] for s in seen):
        nbytes = GPU_BYTES if ctx.device.type == "cuda" else CPU_BYTES
        best = ops.time_group(torch, dist, ctx, group, mine, nbytes, REPEATS)
        gbs = judge.busbw(nbytes, len(mine), best)
    state.setdefault("speed", {})[dim] = gbs
    hung = [g for g in layout.groups(dim) if any(seen[r][0] for r in g)]
    where = lambda g: "+".join(mesh_mod.hosts_of(g, hosts))  # noqa: E731
    c.data = {"ops": checked, "skipped_ops": skipped, "group": mine,
              "hosts": mesh_mod.hosts_of(mine, hosts), "seconds": seconds,
              "hung_groups": hung, "busbw_gbs": gbs}
    if ctx.rank in sum(hung, []):
        limit = GROUP_SHARE * ctx.timeout
        late = [r for r in mine if seen[r][1] / 1000 > limit]
        waiting = [r for r in mine if r not in late]
        detail = "%s on %s: %s did not complete within %.1f s" % (
            judge.group_name(dim, mine), where(mine), stalled or "its op", limit)
        if late:
            detail += "; %s reached it only after %s s, %s waited" % (
                rank_set(late), ", ".join("%.1f" % (seen[r][1] / 1000) for r in late),
                rank_set(waiting) if waiting else "nobody")
        others = len(layout.groups(dim)) - len(hung)
        if others:
            detail += "; the other %d %s group(s) completed" % (others, dim)
        spanned = mesh_mod.hosts_of(mine, hosts)
        advice = ADVICE_HANG % {"dim": dim, "ranks": rank_set(mine)}
        if len(spanned) > 1:
            advice += ADVICE_HOSTS % {"hosts": ", ".join(spanned)}
        c.hang(detail, stack=stacks.dump, advice=advice)
    if error:
        c.fail("%s on %s: %s" % (judge.group_name(dim, mine), where(mine), error),
               advice="a collective of this group returned wrong values: suspect the "
                      "transport between %s" % where(mine))
    n_groups = len(layout.groups(dim))
    c.detail = "%s in %d group(s) of %d, right values%s" % (
        ", ".join(checked) or "no op", n_groups, len(mine),
        "; skipped: %s" % "; ".join(skipped.values()) if skipped else "")
    if hung:
        c.detail += "; hung elsewhere: %s" % ", ".join(judge.group_name(dim, g)
                                                    for g in hung)
    if skipped and not checked:
        c.skip(c.detail)


class _StackAt:
    """This rank's stacks (faulthandler, every thread), taken by a timer thread at
    ``when`` (time.monotonic) unless cancelled first: where the main thread was when its
    group's op was still not done (in the op, or somewhere it should not be)."""

    def __init__(self, when):
        import threading
        import time

        self.dump = None
        self._timer = threading.Timer(max(0.0, when - time.monotonic()), self._take)
        self._timer.daemon = True
        self._timer.start()

    def _take(self):
        import faulthandler
        import tempfile

        with tempfile.TemporaryFile("w+") as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
            f.seek(0)
            self.dump = f.read()

    def cancel(self):
        self._timer.cancel()


def _placement(ctx, c, layout, state):
    if "hosts" not in state:
        c.skip("the mesh was not built (mesh.layout)")
    hosts = state["hosts"]
    if not layout.active:
        c.skip("every degree is 1: no group")
    spans = judge.span_text(layout, hosts)
    c.data = {"spans": {d: [{"ranks": g, "hosts": h} for g, h in v]
                        for d, v in judge.spans(layout, hosts).items()}}
    bad = [(dim, crossing, order) for dim, crossing, order in judge.placement(layout, hosts)
           if order]
    c.data["crossing"] = [{"dim": d, "groups": [g for g, _ in x], "better_order": o}
                          for d, x, o in judge.placement(layout, hosts)]
    if bad:
        dim, crossing, order = bad[0]
        text = "; ".join(
            "%s groups %s span hosts (%s), where the order %s keeps each inside one host"
            % (d, " ".join("[%s]" % ",".join(map(str, g)) for g, _ in x),
               ", ".join(sorted({"+".join(h) for _, h in x})), ",".join(o))
            for d, x, o in bad)
        # Every rank fails: say so, so that the report names every host (as bandwidth).
        c.fail("%s: %s (%s's collectives cross the network every layer: ~10x slower "
               "than inside a node)" % (rank_set(range(ctx.world_size)), text, dim),
               advice=ADVICE_PLACEMENT % {"order": ",".join(order), "dim": dim})
    c.detail = spans
    if len(set(hosts)) == 1:
        c.detail = "1 host: every group inside it"


def _speed(ctx, c, torch, dist, layout, state):
    from ..shared.units import gbs as fmt

    speed = state.get("speed") or {}
    if not [d for d in layout.active if speed.get(d) is not None]:
        c.skip("no dimension was timed (degree 1, or a hang)")
    hosts = state["hosts"]
    # Each rank's figure is its group's, per dimension (-1: not timed).
    every = _gather_floats(torch, dist, ctx, [
        speed[d] if speed.get(d) is not None else -1.0 for d in layout.active])
    figures = []
    for i, dim in enumerate(layout.active):
        for g in layout.groups(dim):
            values = [every[r][i] for r in g if every[r][i] >= 0]
            if values:
                figures.append((dim, g, min(values)))
    table = "; ".join("%s %s" % (d, " ".join(fmt(v) for dd, _, v in figures if dd == d))
                      for d in layout.active if any(dd == d for dd, _, _ in figures))
    c.data = {"groups": [{"dim": d, "ranks": g, "busbw_gbs": v} for d, g, v in figures],
              "slow_ratio": judge.SLOW_RATIO}
    c.detail = "all_reduce busbw per group, GB/s: %s" % table
    if len(set(hosts)) == 1:
        c.detail += "; 1 host: no link to compare"
        return
    # Across hosts: every host pair a group crosses, each direction timed alone (a group
    # inside a host is never compared with one across: loopback is faster than any link).
    pairs = judge.crossed_pairs(layout, hosts)
    if not pairs:
        c.detail += "; no group crosses hosts"
        return
    nbytes = GPU_BYTES if ctx.device.type == "cuda" else LINK_CPU_BYTES
    best = [0.0] * len(pairs)
    for _ in range(ROUNDS):
        # Each link's best rate over the rounds: load on the machine only slows a transfer
        # down, a rate limit caps every one; a suspect link is measured again.
        times = []
        for src, dst in pairs:
            dist.barrier()
            seconds = ops.time_edge(torch, dist, ctx, src, dst, nbytes, LINK_REPEATS)
            times.append(seconds if seconds is not None else -1.0)
        got = _gather_floats(torch, dist, ctx, times)
        for i, (_, dst) in enumerate(pairs):
            if got[dst][i] > 0:
                best[i] = max(best[i], nbytes / got[dst][i] / 1e9)
        edges = [(hosts[src], hosts[dst], best[i]) for i, (src, dst) in enumerate(pairs)]
        if not judge.slow_edges(edges, judge.SUSPECT_RATIO):
            break
    c.data["edges"] = [{"from": a, "to": b, "gbs": r} for a, b, r in edges]
    links = ", ".join("%s->%s %s" % (a, b, fmt(r)) for a, b, r in edges)
    slow = judge.slow_edges(edges)
    if not slow:
        c.detail += "; links between hosts, GB/s: %s; none below 1/%g of the others' " \
                    "median" % (links, judge.SLOW_RATIO)
        return
    sender, receiver, rate, median = slow[0]
    crossing = judge.groups_over(layout, hosts, sender, receiver)
    dim, group, value = min(((d, g, v) for d, g, v in figures
                             if (d, g) in crossing), key=lambda f: f[2],
                            default=(crossing[0][0], crossing[0][1], None))
    c.data["slow"] = {"dim": dim, "ranks": group, "busbw_gbs": value, "host": sender,
                      "link": [sender, receiver], "link_gbs": rate, "median_gbs": median}
    c.data["slow"]["detail"] = detail = (
        "%s (%s)%s is the slowest group over the link %s -> %s at %s GB/s, %.0fx below "
           "the other links' median %s GB/s; %s sends slowly%s (links, GB/s: %s; %s)" % (
               judge.group_name(dim, group), "+".join(mesh_mod.hosts_of(group, hosts)),
               " at %s GB/s busbw" % fmt(value) if value is not None else "", sender,
               receiver, fmt(rate), median / rate if rate else float("inf"), fmt(median),
               sender, " (or %s receives slowly: a third host tells them apart)" % receiver
               if len(set(hosts)) == 2 else "", links, table))
    if ctx.host == sender:  # the sender's ranks fail, as the bandwidth probe's
        c.detail = detail
        c.fail(detail, advice=ADVICE_SLOW % {"host": sender, "dim": dim})
    c.detail += "; slow: %s" % detail


def _gather_floats(torch, dist, ctx, values):
    """Every rank's ``values`` (the same length on every rank), in rank order."""
    buf = torch.tensor([float(v) for v in values], dtype=torch.float64, device=ctx.device)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [t.cpu().tolist() for t in out]
