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
