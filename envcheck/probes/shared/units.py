"""Sizes and rates as people read them, and waiting for a device: used by the nccl,
bandwidth and repeat probes."""


def human_bytes(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return "%d %s" % (nbytes >> shift, unit)
    return "%d B" % nbytes


def sync_device(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gbs(value):
    """A figure in GB/s, with the digits that matter from 1 TB/s down to 1 kB/s."""
    if value >= 100:
        return "%.0f" % value
    return "%.3g" % value if value >= 10 else "%.2g" % value
