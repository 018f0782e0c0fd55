"""A probe for `envcheck run --probe-path dev/gpu/probes.py -p gpustuck` on a GPU: the
rank launches a kernel that never ends and waits for it in torch.cuda.synchronize. The
hang must be named with the rank's stack, the rank killed, and no process left holding
the GPU (dev/gpu_check.sh asks nvidia-smi afterwards)."""


def probe_gpustuck(ctx):
    """a kernel that never ends: the rank waits in torch.cuda.synchronize"""
    import torch
    with ctx.check("spin"):
        torch.cuda._sleep(1 << 50)
        torch.cuda.synchronize()


def probe_stuck(ctx):
    """rank 1 sleeps in its own code; the others wait for it in a barrier"""
    import time
    import torch.distributed as dist
    with ctx.check("wait"):
        if ctx.rank == 1:
            time.sleep(600)
        dist.barrier()
