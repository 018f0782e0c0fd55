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


def broadcast_text(ctx, text, src=0):
    """``text`` as rank ``src`` has it, on every rank, at any length (tensors only)."""
    import torch
    import torch.distributed as dist

    data = (text or "").encode("utf-8") if ctx.rank == src else b""
    size = torch.tensor([len(data)], dtype=torch.int64, device=ctx.device)
    dist.broadcast(size, src=src)
    buf = torch.zeros(int(size.item()), dtype=torch.uint8, device=ctx.device)
    if ctx.rank == src and data:
        buf.copy_(torch.tensor(list(data), dtype=torch.uint8))
    if buf.numel():
        dist.broadcast(buf, src=src)
    return bytes(buf.cpu().tolist()).decode("utf-8", "replace")
