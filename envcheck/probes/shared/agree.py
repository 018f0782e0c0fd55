"""What every rank must agree on before a collective that would otherwise hang: used by
the checkpoint and fsdp probes."""

def object_collectives(ctx, dist):
    """(this rank's exception or None, ranks that failed): all_gather_object fails on
    every rank alike (after its collectives), unlike DCP's gather/scatter of plans."""
    from ...worker.gather import all_gather_ints

    out = [None] * ctx.world_size
    try:
        dist.all_gather_object(out, {"rank": ctx.rank})
        error = None
    except BaseException as exc:  # noqa: B036 - torch raises BaseException subclasses too
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        error = exc
    flags = all_gather_ints(ctx, [0 if error else 1])
    return error, [r for r, (ok,) in enumerate(flags) if not ok]


def sync_replicas(ctx, model, torch):
    """Broadcast rank 0's weights (as DDP does); True where the ranks' weights differed."""
    import hashlib

    import torch.distributed as dist

    from ...worker.gather import all_gather_strings

    tensors = [t for t in model.state_dict().values()
               if isinstance(t, torch.Tensor) and t.dtype != torch.bool]
    sums = repr([float(t.detach().double().sum()) for t in tensors]).encode("utf-8")
    differed = len(set(all_gather_strings(ctx, hashlib.sha1(sums).hexdigest()))) > 1
    with torch.no_grad():
        for t in tensors:
            dist.broadcast(t, 0)
    return differed


def agreed(ctx, result):
    """``result`` where every rank has one (the DCP round trip worked everywhere), else None."""
    from ...worker.gather import all_gather_ints

    flags = all_gather_ints(ctx, [1 if result else 0])
    return result if all(f for (f,) in flags) else None
