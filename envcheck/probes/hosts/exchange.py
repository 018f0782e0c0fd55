"""Every rank's small JSON value, on every rank, through tensor collectives only.

``gather.all_gather_strings`` holds 255 bytes a rank; the facts a host compares (versions,
library paths, variables) need more. ``all_gather_object`` would do, but it pickles
through numpy in some torch builds (the 2.13 CPU wheel: "Numpy is not available"), and a
host whose numpy is broken must be reported by the skew check, not break it.
"""

import json


def all_gather_json(ctx, value):
    """[value of rank 0, value of rank 1, ...]: two all_gathers (lengths, then bytes)."""
    import torch
    import torch.distributed as dist

    data = json.dumps(value, sort_keys=True).encode("utf-8")
    size = torch.tensor([len(data)], dtype=torch.int64, device=ctx.device)
    sizes = [torch.zeros_like(size) for _ in range(ctx.world_size)]
    dist.all_gather(sizes, size)
    longest = max(int(s.item()) for s in sizes)
    buf = torch.zeros(max(longest, 1), dtype=torch.uint8, device=ctx.device)
    if data:
        buf[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(ctx.device)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [json.loads(bytes(t.cpu()[:int(n.item())].tolist()).decode("utf-8"))
            for t, n in zip(out, sizes)]
