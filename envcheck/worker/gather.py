"""Small cross-rank helpers built on tensor collectives only.

``all_gather_object`` pickles through numpy in some torch builds (the 2.13 CPU wheel
fails with "Numpy is not available" without it), so the launch probe compares ranks with
these instead: a missing numpy must not look like a rank mapping problem.
"""


def all_gather_strings(ctx, text, max_bytes=255):
    import torch
    import torch.distributed as dist

    data = text.encode("utf-8")[:max_bytes]
    buf = torch.zeros(max_bytes + 1, dtype=torch.uint8, device=ctx.device)
    buf[0] = len(data)
    if data:
        buf[1:len(data) + 1] = torch.tensor(list(data), dtype=torch.uint8)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    result = []
    for t in out:
        t = t.cpu()
        n = int(t[0])
        result.append(bytes(t[1:n + 1].tolist()).decode("utf-8", "replace"))
    return result


def all_gather_ints(ctx, values):
    import torch
    import torch.distributed as dist

    buf = torch.tensor(list(values), dtype=torch.int64, device=ctx.device)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [[int(v) for v in t.cpu().tolist()] for t in out]
