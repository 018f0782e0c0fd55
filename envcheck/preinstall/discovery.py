"""Which NVIDIA GPUs and driver this node has, on every driver an admin still runs.

In order: NVML through NVIDIA's own binding (nvidia-ml-py, imported as ``pynvml``) when
it is installed and the driver's libnvidia-ml loads (it reports compute capability on
R470 too); else nvidia-smi's CSV query (``nvidia_smi.py``, which falls back to the GPU
name table where an old nvidia-smi refuses ``compute_cap``); no nvidia-smi on PATH is no
NVIDIA GPU. ``envcheck check`` and ``envcheck run`` (its GPU count) both ask here.
"""

import dataclasses
from typing import Tuple

from . import nvidia_smi


@dataclasses.dataclass(frozen=True)
class Discovery:
    gpus: Tuple[nvidia_smi.Gpu, ...]
    how: str  # "NVML", "nvidia-smi", "none"
    notes: Tuple[str, ...] = ()


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def nvml():
    """(gpus, note): gpus is None when NVML cannot answer here (note says why)."""
    try:
        import pynvml
    except ImportError:
        return None, None  # nvidia-ml-py is optional: nothing to say
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return None, "NVML did not start (%s)" % exc
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1 << 20)
            gpus.append(nvidia_smi.Gpu(i, _text(pynvml.nvmlDeviceGetName(handle)),
                                       "%d.%d" % (major, minor), driver, int(memory),
                                       "NVML"))
        return gpus, None
    except pynvml.NVMLError as exc:
        return None, "NVML could not list the GPUs (%s)" % exc
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def visible(count, environ):
    """How many of ``count`` GPUs a process started with ``environ`` sees: CUDA reads
    CUDA_VISIBLE_DEVICES as a comma list and stops at the first entry that names no
    device (an index out of range, a negative one, a repeat), so "" hides every GPU and
    "0,7" on a 2-GPU node shows one. UUIDs (GPU-..., MIG-...) count as they stand."""
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return count
    seen = []
    for entry in value.split(","):
        entry = entry.strip()
        if entry.lstrip("-").isdigit():
            key = int(entry)
            if not 0 <= key < count:
                break
        elif entry.upper().startswith(("GPU-", "MIG-")):
            key = entry.upper()
        else:
            break
        if key in seen:
            break
        seen.append(key)
    return min(len(seen), count)


def discover(resolve_name=None, executable="nvidia-smi"):
    """This node's GPUs; NvidiaSmiError when nvidia-smi is there but broken."""
    gpus, note = nvml()
    if gpus is not None:
        return Discovery(tuple(gpus), "NVML")
    try:
        found = nvidia_smi.query(executable, resolve_name=resolve_name)
    except nvidia_smi.NvidiaSmiError as exc:
        if note:  # neither answered: say both, in one line, nvidia-smi's first
            raise nvidia_smi.NvidiaSmiError("%s (and %s)" % (str(exc).rstrip("."), note)) \
                from None
        raise
    # Why NVML was passed over matters only where there are GPUs: on a node without an
    # NVIDIA driver, "no libnvidia-ml" is the expected state, not news.
    notes = (note,) if note and found else ()
    return Discovery(tuple(found), "nvidia-smi" if found else "none", notes)
