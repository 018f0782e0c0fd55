"""What this rank sees: torch build, CUDA, NCCL, GPUs, driver, Python, OS, env vars.

Rank 0 collects the full picture once; every rank reports its own host, device and
CUDA_VISIBLE_DEVICES so that the supervisor can show per-rank differences. Values that
this torch build cannot give are ``None``, never an exception: a CPU wheel has no NCCL.
"""

import os
import platform
import sys

from ..core import redact
from ..core.host import glibc_version
from ..launch import procs
from .hazards import numpy_version

_ENV_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "MASTER_", "SLURM_", "OMP_", "GLOO_",
                 "PYTORCH_", "NVIDIA_")
_ENV_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
              "LD_LIBRARY_PATH", "PYTHONPATH")
def relevant_env(environ=None):
    """The variables that shape a distributed job, secrets redacted (core.redact)."""
    environ = os.environ if environ is None else environ
    out = {}
    for name in sorted(environ):
        if name.startswith(_ENV_PREFIXES) or name in _ENV_NAMES:
            value = redact.environment_value(name, environ[name])
            if value is not None:
                out[name] = value
    return out


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def _driver_version():
    try:
        proc = procs.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10)
    except (OSError, procs.TimeoutExpired):
        return None
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return lines[0] if proc.returncode == 0 and lines else None


def _gpus(torch):
    if not torch.cuda.is_available():
        return []
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append({
            "index": i,
            "name": p.name,
            "capability": "%d.%d" % (p.major, p.minor),
            "memory_gib": round(p.total_memory / 2**30, 1),
        })
    return gpus


def _arch_list(torch):
    archs = _safe(torch.cuda.get_arch_list) or []
    if not archs:
        # Before 2.14 get_arch_list() answers [] without a GPU; the compiled flags do not.
        flags = _safe(lambda: torch._C._cuda_getArchFlags())
        archs = flags.split() if flags else []
    return archs


def nccl_version_string(v):
    """torch.cuda.nccl.version(): a tuple since torch 1.x-late, an int code before."""
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v)
    v = int(v)
    # NCCL_VERSION_CODE: major*1000+minor*100+patch until 2.8, major*10000+... after.
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def _nccl_version(torch):
    if not getattr(torch.version, "cuda", None):
        return None
    return _safe(lambda: nccl_version_string(torch.cuda.nccl.version()))


def frameworks(find_spec=None, version=None):
    """{"lightning": "2.5.0", ...}: the training frameworks (core.frameworks) this
    interpreter has installed. Found with find_spec and read from their metadata, never
    imported: importing DeepSpeed alone can take seconds and compile CUDA ops."""
    import importlib.metadata
    import importlib.util

    from ..core.frameworks import FRAMEWORKS

    find_spec = find_spec or importlib.util.find_spec
    version = version or importlib.metadata.version
    found = {}
    for key, fw in FRAMEWORKS.items():
        if not any(_safe(lambda m=m: find_spec(m)) for m in fw.modules):
            continue
        found[key] = next((v for v in (_safe(lambda d=d: version(d))
                                       for d in fw.distributions) if v), None)
    return found


def _numpy():
    # The numpy that would be imported, not the first dist-info found: another numpy
    # can shadow it on sys.path (seen: numpy 2 before a torch 2.1 venv's numpy 1.26).
    return numpy_version()[1]


def collect(torch):
    """The full environment, collected on rank 0."""
    cuda = getattr(torch.version, "cuda", None)
    return {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", None),
        "torch_path": os.path.dirname(torch.__file__),
        "cuda": cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": _safe(lambda: torch.backends.cudnn.version()) if cuda else None,
        "nccl": _nccl_version(torch),
        "arch_list": _arch_list(torch) if cuda else [],
        "cuda_available": bool(_safe(torch.cuda.is_available)),
        "gpus": _safe(lambda: _gpus(torch)) or [],
        "driver": _driver_version(),
        "distributed_available": bool(_safe(torch.distributed.is_available)),
        "gloo_available": bool(_safe(torch.distributed.is_gloo_available)),
        "nccl_available": bool(_safe(torch.distributed.is_nccl_available)),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "os": platform.platform(),
        "machine": platform.machine(),
        "glibc": glibc_version(),
        "numpy": _numpy(),
        "frameworks": frameworks(),
        "env": relevant_env(),
    }
