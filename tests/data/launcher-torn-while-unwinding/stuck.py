
def probe_stuck(ctx):
    """rank 1 sleeps; the others wait for it in a barrier"""
    import time
    import torch.distributed as dist
    with ctx.check("wait"):
        if ctx.rank == 1:
            time.sleep(600)
        dist.barrier()
