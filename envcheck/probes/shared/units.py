"""Sizes as people read them, and waiting for a device: used by the nccl and bandwidth
probes."""


def human_bytes(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d %s" % (nbytes >> shift, unit)
    return "%d B" % nbytes


def sync_device(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
