"""The transfers, timed: torch.distributed send/recv only, so that the same code measures
gloo over TCP on CPU and NCCL's P2P on GPUs (the device decides which)."""

import time

from ..shared.units import sync_device


def run(torch, dist, ctx, units, phase_list, nbytes, repeats, warmup=True):
    """With ``warmup``, every phase once first, untimed (NCCL opens a pair's connection
    on its first send/recv; TCP starts a connection, and restarts one idle since the
    last probe, with a small window that only a transfer of the full size opens), then
    ``repeats`` rounds of every phase at ``nbytes``. Returns (times, wrong):
    times[rank] = that rank's seconds per step (0 where it only sent or sat out: the
    receiver's clock is the one read), gathered to every rank; wrong: elements this
    rank received that were not its sender's."""
    from ..shared import schedule

    roles = [schedule.roles(units, p) for p in phase_list]
    send = torch.full((nbytes // 4,), float(ctx.rank + 1), dtype=torch.float32,
                      device=ctx.device)
    recv = torch.empty_like(send)
    mine, wrong, last_sender = [], 0, None
    count = nbytes // 4
    for repeat in range(-1 if warmup else 0, repeats):
        for role in roles:
            what = role.get(ctx.rank)
            # Everyone starts together: a receiver's clock must not include the time its
            # sender spent still in the previous phase.
            dist.barrier()
            sync_device(torch, ctx.device)
            t0 = time.perf_counter()
            if what and what[0] == "send":
                dist.send(send[:count], what[1])
            elif what:
                dist.recv(recv[:count], what[1])
                last_sender = what[1]
            sync_device(torch, ctx.device)
            seconds = time.perf_counter() - t0
            if repeat >= 0:
                mine.append(seconds if what and what[0] == "recv" else 0.0)
    if last_sender is not None:
        wrong = int((recv != float(last_sender + 1)).sum().item())
    buf = torch.tensor(mine, dtype=torch.float64, device=ctx.device)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [t.cpu().tolist() for t in out], wrong
