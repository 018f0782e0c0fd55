"""Each parallel dimension's collectives, on one group, with values every rank can predict.

What a dimension uses in training, as TorchTitan and Megatron run it:

- data parallel (``dp_replicate``: DDP's gradient all-reduce; ``dp_shard``: FSDP's
  parameter all-gather and gradient reduce-scatter): all_reduce, reduce_scatter_tensor,
  and for dp_shard all_gather_into_tensor;
- ``tp``: all_gather_into_tensor (sequence/column-parallel activations) and all_reduce
  (row-parallel outputs);
- ``cp``: all_gather_into_tensor (context parallel's K/V gather);
- ``pp``: send/recv between neighbouring stages, activations forward, gradients back;
- ``ep``: all_to_all_single with uneven splits (the token dispatch of a MoE layer).

Every op is issued with ``async_op=True`` and waited on with a deadline, so that a group
whose collective never completes is seen by its own ranks (``Stalled``), not only by the
supervisor's timeout. An op a backend lacks on this release (gloo's reduce_scatter on
older torch) is skipped with the reason, not failed.
"""

import datetime
import time

# Elements of the value checks (small: correctness, not speed).
ELEMENTS = 1024
# After its deadline, a rank that arrives late still issues the op its peers are waiting
# in (so that theirs completes and no op is left pending), and waits this long for it.
LATE_GRACE_S = 1.0
MISSING = ("not supported", "does not support", "unsupported", "not implemented",
           "unimplemented")


class Stalled(Exception):
    """An op of this rank's group did not complete by the deadline; ``entered``: the
    seconds this rank took to reach its first op (a late rank is the cause)."""

    def __init__(self, op, entered):
        super().__init__(op)
        self.op = op
        self.entered = entered


def plan(dim):
    """The op names a dimension runs, in order."""
    return {
        "dp_replicate": ["all_reduce", "reduce_scatter"],
        "dp_shard": ["all_reduce", "reduce_scatter", "all_gather"],
        "tp": ["all_gather", "all_reduce"],
        "cp": ["all_gather"],
        "pp": ["send_recv"],
        "ep": ["all_to_all"],
    }[dim]


def run(torch, dist, ctx, dim, group, ranks, start, deadline):
    """Run ``dim``'s ops on ``group`` (global ``ranks``, in group order) from ``start``
    until ``deadline`` (time.monotonic). Returns (checked, skipped, entered, seconds):
    checked: op names whose values were right; skipped: {op: reason}; entered: seconds
    from ``start`` to this rank's first op. Raises Stalled (an op not done by the
    deadline), or AssertionError naming a wrong value."""
    checked, skipped, entered = [], {}, None
    t0 = start
    for op in plan(dim):
        now = time.monotonic()
        late = False
        if entered is None:
            entered = now - t0
            # Past the deadline already: its peers are waiting in this op (or its
            # doorbell); issue that all the same, so that theirs completes and nothing is
            # left pending, then stop.
            late = now > deadline
        elif now > deadline:
            raise Stalled(op, entered)
        limit = max(deadline, time.monotonic() + LATE_GRACE_S) if late else deadline
        if op in DOORBELL:
            ring = dist.all_reduce(torch.ones(1, device=ctx.device), group=group,
                                   async_op=True)
            _wait(ring, limit, op, entered)
            if late:
                raise Stalled(op, entered)
        try:
            works, verify = ISSUE[op](torch, dist, ctx, group, ranks)
        except (RuntimeError, ValueError, NotImplementedError) as exc:
            if any(m in str(exc).lower() for m in MISSING):
                skipped[op] = "%s on %s: %s" % (op, dist.get_backend(group),
                                                _first_line(exc))
                continue
            raise
        for work in works:
            if op in DOORBELL:
                work.wait()  # every rank is there: the doorbell rang
            else:
                _wait(work, limit, op, entered)
        problem = verify()
        if problem:
            raise AssertionError("%s: %s" % (op, problem))
        checked.append(op)
        if late:
            raise Stalled(op, entered)
    return checked, skipped, entered or 0.0, time.monotonic() - t0


# Ops whose Work does not honour wait(timeout) on gloo (2.13: reduce_scatter runs inside
# wait; a timed-out send/recv closes the pair for good): a one-element all_reduce on the
# group (which does) first, so that a rank that never comes is seen there.
DOORBELL = ("reduce_scatter", "send_recv")


def _wait(work, limit, op, entered):
    """Wait for ``work`` until ``limit`` (time.monotonic); Stalled past it."""
    left = limit - time.monotonic()
    if left <= 0 and not work.is_completed():
        raise Stalled(op, entered)
    try:
        work.wait(timeout=datetime.timedelta(seconds=max(left, 0.001)))
    except RuntimeError as exc:
        if "timed out" in str(exc).lower() or "timeout" in str(exc).lower():
            raise Stalled(op, entered) from None
        raise


def _first_line(exc):
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _all_reduce(torch, dist, ctx, group, ranks):
    t = torch.full((ELEMENTS,), float(ctx.rank + 1), device=ctx.device)
    work = dist.all_reduce(t, group=group, async_op=True)
    expected = float(sum(r + 1 for r in ranks))

    def verify():
        got = t.cpu()
        if not bool((got == expected).all()):
            return "sum over ranks %s: expected %g, got %g..%g" % (
                ranks, expected, got.min().item(), got.max().item())
        return None
    return [work], verify


def _reduce_scatter(torch, dist, ctx, group, ranks):
    n, me = len(ranks), ranks.index(ctx.rank)
    k = ELEMENTS // n or 1
    # chunk j of rank r holds (r + 1) * (j + 1): chunk ``me`` sums to sum(r + 1) * (me + 1)
    inp = torch.cat([torch.full((k,), float((ctx.rank + 1) * (j + 1))) for j in range(n)])
    inp = inp.to(ctx.device)
    out = torch.empty(k, device=ctx.device)
    # reduce_scatter_single where torch has it (2.13 deprecates reduce_scatter_tensor)
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    work = fn(out, inp, group=group, async_op=True)
    expected = float(sum(r + 1 for r in ranks) * (me + 1))

    def verify():
        got = out.cpu()
        if not bool((got == expected).all()):
            return "chunk %d over ranks %s: expected %g, got %g..%g" % (
                me, ranks, expected, got.min().item(), got.max().item())
        return None
    return [work], verify


def _all_gather(torch, dist, ctx, group, ranks):
    n = len(ranks)
    k = ELEMENTS // n or 1
    t = torch.full((k,), float(ctx.rank), device=ctx.device)
    out = torch.empty(k * n, device=ctx.device)
    # all_gather_single where torch has it (2.13 deprecates all_gather_into_tensor)
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    work = fn(out, t, group=group, async_op=True)

    def verify():
        got = [int(v) for v in out.cpu().view(n, k)[:, 0].tolist()]
        if got != list(ranks):
            return "expected the ranks' tensors in group order %s, got %s" % (ranks, got)
        return None
    return [work], verify


def _send_recv(torch, dist, ctx, group, ranks):
    """Stage s sends activations to s+1 and gets gradients back from it."""
    s, n = ranks.index(ctx.rank), len(ranks)
    works, checks = [], []
    fwd = torch.full((ELEMENTS,), float(ctx.rank + 1), device=ctx.device)
    bwd = torch.full((ELEMENTS,), -float(ctx.rank + 1), device=ctx.device)
    if s + 1 < n:
        works.append(dist.isend(fwd, ranks[s + 1], group=group))
        grad = torch.empty(ELEMENTS, device=ctx.device)
        works.append(dist.irecv(grad, ranks[s + 1], group=group))
        checks.append(("gradient from stage %d (rank %d)" % (s + 1, ranks[s + 1]), grad,
                       -float(ranks[s + 1] + 1)))
    if s > 0:
        act = torch.empty(ELEMENTS, device=ctx.device)
        works.append(dist.irecv(act, ranks[s - 1], group=group))
        works.append(dist.isend(bwd, ranks[s - 1], group=group))
        checks.append(("activation from stage %d (rank %d)" % (s - 1, ranks[s - 1]), act,
                       float(ranks[s - 1] + 1)))

    def verify():
        for what, buf, expected in checks:
            got = buf.cpu()
            if not bool((got == expected).all()):
                return "%s: expected %g, got %g..%g" % (what, expected, got.min().item(),
                                                        got.max().item())
        return None
    return works, verify


def splits(n, me):
    """(send counts, receive counts) of rank ``me`` of ``n`` in the uneven all_to_all:
    rank i sends (i + j) % n + 1 elements to rank j."""
    return [(me + j) % n + 1 for j in range(n)], [(p + me) % n + 1 for p in range(n)]


def _all_to_all(torch, dist, ctx, group, ranks):
    n, me = len(ranks), ranks.index(ctx.rank)
    send, recv = splits(n, me)
    inp = torch.cat([torch.full((c,), float(ctx.rank * 1000 + j)) for j, c in
                     enumerate(send)]).to(ctx.device)
    out = torch.empty(sum(recv), device=ctx.device)
    work = dist.all_to_all_single(out, inp, recv, send, group=group, async_op=True)
    expected = torch.cat([torch.full((c,), float(ranks[p] * 1000 + me)) for p, c in
                          enumerate(recv)])

    def verify():
        got = out.cpu()
        if not torch.equal(got, expected):
            bad = int((got != expected).sum().item())
            return "uneven splits %s in, %s out: %d of %d elements wrong" % (
                recv, send, bad, got.numel())
        return None
    return [work], verify


ISSUE = {"all_reduce": _all_reduce, "reduce_scatter": _reduce_scatter,
         "all_gather": _all_gather, "send_recv": _send_recv, "all_to_all": _all_to_all}


def time_group(torch, dist, ctx, group, ranks, nbytes, repeats):
    """Best-of-``repeats`` seconds of an all_reduce of ``nbytes`` on the group (every
    group of a dimension at once, as training runs them)."""
    t = torch.ones(nbytes // 4, dtype=torch.float32, device=ctx.device)
    dist.all_reduce(t, group=group)  # warm-up: connections, buffers
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        dist.all_reduce(t, group=group)
        if ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)
        seconds = time.perf_counter() - t0
        best = seconds if best is None else min(best, seconds)
    return best


def time_edge(torch, dist, ctx, src, dst, nbytes, repeats):
    """Best-of seconds of a send from global rank ``src`` to ``dst`` (the receiver's
    clock), on the world group; other ranks return None."""
    t = torch.ones(nbytes // 4, dtype=torch.float32, device=ctx.device)
    best = None
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        if ctx.rank == src:
            dist.send(t, dst)
        elif ctx.rank == dst:
            dist.recv(t, src)
        seconds = time.perf_counter() - t0
        if i and ctx.rank == dst:
            best = seconds if best is None else min(best, seconds)
    return best
