"""collectives: do the basic collectives give the right numbers on this backend?

Real failure: NCCL jobs that initialise but then hang or return garbage because of a
broken transport (P2P, IB, shared memory) or mismatched NCCL/driver. Every check here
computes a value every rank can predict, so a wrong number is caught, not just an error.
"""


def probe_collectives(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import time

    import torch
    import torch.distributed as dist

    world = ctx.world_size

    with ctx.check("init") as c:
        backend = dist.get_backend()
        c.data = {"backend": backend, "init_seconds": ctx.init_seconds}
        c.detail = "%s, %d ranks, init %.3f s" % (backend, world, ctx.init_seconds)
        if ctx.device.type == "cuda" and backend != "nccl":
            c.detail += " (GPU ranks on %s: NCCL is the fast path)" % backend

    with ctx.check("all_reduce") as c:
        c.advice = ("all_reduce returned a wrong sum: suspect the transport; rerun with "
                    "NCCL_DEBUG=INFO (GPU) or GLOO_SOCKET_IFNAME set to the right NIC")
        t = torch.full((1024,), float(ctx.rank + 1), device=ctx.device)
        dist.all_reduce(t)
        expected = world * (world + 1) / 2
        got = t.cpu()
        if not bool((got == expected).all()):
            c.fail("sum over %d ranks: expected %s everywhere, got %s..%s"
                   % (world, expected, got.min().item(), got.max().item()))
        i = torch.tensor([ctx.rank], dtype=torch.int64, device=ctx.device)
        dist.all_reduce(i, op=dist.ReduceOp.MAX)
        if int(i.item()) != world - 1:
            c.fail("MAX over ranks: expected %d, got %d" % (world - 1, int(i.item())))
        c.detail = "SUM and MAX over %d ranks" % world

    with ctx.check("broadcast") as c:
        for src in sorted({0, world - 1}):
            t = (torch.arange(16, dtype=torch.float32, device=ctx.device) * (src + 1)
                 if ctx.rank == src else torch.zeros(16, device=ctx.device))
            dist.broadcast(t, src=src)
            expected = torch.arange(16, dtype=torch.float32) * (src + 1)
            if not torch.equal(t.cpu(), expected):
                c.fail("broadcast from rank %d: got %s" % (src, t.cpu().tolist()))
        c.detail = "from rank 0 and rank %d" % (world - 1)

    with ctx.check("all_gather") as c:
        t = torch.full((4,), ctx.rank, dtype=torch.int64, device=ctx.device)
        out = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(out, t)
        got = [int(x[0].item()) for x in out]
        if got != list(range(world)):
            c.fail("expected ranks %s, got %s" % (list(range(world)), got))
        c.detail = "%d tensors in rank order" % world

    with ctx.check("all_gather_object") as c:
        out = [None] * world
        dist.all_gather_object(out, {"rank": ctx.rank, "host": ctx.host})
        got = [o["rank"] for o in out]
        if got != list(range(world)):
            c.fail("expected ranks %s, got %s" % (list(range(world)), got))
        c.detail = "%d pickled objects in rank order" % world

    with ctx.check("barrier") as c:
        t0 = time.monotonic()
        dist.barrier()
        c.data = {"seconds": time.monotonic() - t0}
        c.detail = "all %d ranks" % world
