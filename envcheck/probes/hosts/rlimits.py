"""This host's limits that distributed training and its data loaders run into.

- /dev/shm: NCCL's SHM transport puts its buffers between the GPUs of a host there, and
  DataLoader workers pass every batch through it. Docker's default is 64 MB
  (``docker run --shm-size``, "If the size is omitted, the system uses 64m"), which
  PyTorch's README says "is not enough" for multiprocessing data loaders, and with which
  NCCL segfaulted in ``ncclShmOpen`` in PyTorch's own tutorial CI (pytorch/tutorials
  #2475, fixed with ``--shm-size=2gb``): at or below it, the check fails. DeepSpeed's
  ``ds_report`` warns below 512 MB (deepspeed/env_report.py ``get_shm_size``) without
  saying what breaks: between the two, a warning.
- memlock (RLIMIT_MEMLOCK): RDMA registers memory that must stay locked; NVIDIA runs its
  containers with ``--ulimit memlock=-1`` (unlimited) and no documented floor: a limit
  where there are RDMA devices (/sys/class/infiniband) is a warning; without them nothing
  locks memory for NCCL, and the limit is reported only.
- open files (RLIMIT_NOFILE): DataLoader workers share tensors through file descriptors
  (torch.multiprocessing's default ``file_descriptor`` strategy; its docs: with low
  limits, raise them or use ``file_system``); "received 0 items of ancdata" and "Too
  many open files" are what 1024, the usual default soft limit, gives (pytorch#973). No
  source gives a floor: at or below 1024, a warning.
"""

import os
import resource

MiB = 1 << 20
SHM_FAIL = 64 * MiB
SHM_WARN = 512 * MiB
NOFILE_WARN = 1024
SHM_ADVICE = ("give /dev/shm more room: docker run --shm-size=1g (or --ipc=host); "
              "Kubernetes: an emptyDir with medium: Memory mounted at /dev/shm; SLURM/"
              "bare metal: mount -o remount,size=50% /dev/shm; and remove stale files "
              "from it")
MEMLOCK_ADVICE = ("raise the locked-memory limit to unlimited where RDMA is used: docker "
                  "run --ulimit memlock=-1, or '* - memlock unlimited' in "
                  "/etc/security/limits.conf (SLURM: PropagateResourceLimits, or "
                  "LimitMEMLOCK=infinity in slurmd's unit)")
NOFILE_ADVICE = ("raise the open-files limit: ulimit -n 65536 before the launcher (up to "
                 "the hard limit; docker run --ulimit nofile=65536), or "
                 "torch.multiprocessing.set_sharing_strategy('file_system') in the "
                 "training script")
UNCONFIRMED = "no source gives a floor: a warning, unconfirmed"


def size(nbytes):
    if nbytes >= 1 << 30:
        return "%.1f GiB" % (nbytes / (1 << 30))
    if nbytes >= MiB:
        return "%d MiB" % (nbytes // MiB)
    return "%d KiB" % (nbytes // 1024)


def _limit(value):
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def shm(host, path="/dev/shm"):
    """(problem or None, kind: "fail" / "warn" / None, data)."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return ("%s on %s cannot be read (%s): NCCL's SHM transport and DataLoader "
                "workers need it" % (path, host, exc.strerror), "fail", {})
    total, free = st.f_frsize * st.f_blocks, st.f_frsize * st.f_bavail
    data = {"path": path, "size": total, "free": free}
    said = "%s on %s is %s (%s free)" % (path, host, size(total), size(free))
    if free <= SHM_FAIL:
        return ("%s: at most Docker's 64 MiB default, too small for NCCL's SHM transport "
                "and DataLoader workers (bus errors, 'No space left on device')" % said,
                "fail", data)
    if min(total, free) < SHM_WARN:
        return ("%s: below the 512 MiB DeepSpeed's ds_report warns at (%s)"
                % (said, UNCONFIRMED), "warn", data)
    return None, None, dict(data, said=said)


def rdma_devices(path="/sys/class/infiniband"):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def memlock(host):
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    devices = rdma_devices()
    data = {"soft": _limit(soft), "hard": _limit(hard), "rdma": devices}
    said = "locked-memory limit on %s is %s" % (
        host, "unlimited" if soft == resource.RLIM_INFINITY else size(soft))
    if devices and soft != resource.RLIM_INFINITY:
        return ("%s with RDMA devices (%s): RDMA registration needs it unlimited "
                "(NVIDIA: --ulimit memlock=-1; %s)" % (said, ", ".join(devices[:4]),
                                                       UNCONFIRMED), "warn", data)
    if not devices:
        said += "; no RDMA device here (/sys/class/infiniband), so NCCL locks none"
    return None, None, dict(data, said=said)


def nofile(host):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    data = {"soft": _limit(soft), "hard": _limit(hard)}
    said = "open-files limit on %s is %s (hard %s)" % (host, _limit(soft), _limit(hard))
    if soft != resource.RLIM_INFINITY and soft <= NOFILE_WARN:
        return ("%s: DataLoader workers that share tensors through file descriptors run "
                "out ('received 0 items of ancdata', 'Too many open files'; %s)"
                % (said, UNCONFIRMED), "warn", data)
    return None, None, dict(data, said=said)
