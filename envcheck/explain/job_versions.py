"""The versions a job printed, and what the matrix says about them.

Read from the lines that print them: ``collect_env`` (``PyTorch version: 2.1.0+cu121``,
``CUDA used to build PyTorch: 12.1``, ``Nvidia driver version: 535.104.05``, ``Python
version: 3.10.12``), ``accelerate env`` (``PyTorch version (GPU?): 2.2.2+cu121 (True)``,
``Numpy version: 1.26.4``), ``nvidia-smi`` (``Driver Version: 535.104.05  CUDA Version:
12.2``), NCCL (``NCCL version 2.18.1+cuda12.1``, ``cudaDriverVersion 12020``) and torch's
own errors (``The NVIDIA driver on your system is too old (found version 11040)``); and,
from ``NCCL_DEBUG=INFO``, the transports NCCL chose (``Channel 00/0 : 0[0] -> 1[1] via
P2P/IPC``), which is what ``nccl.p2p_hang`` needs to tell a P2P hang from another.

Judged against the matrix: whether the torch release is one it knows, whether the driver
runs the CUDA the torch was built with (``cuda.toml``: the driver each toolkit needs),
whether the NCCL is the one that torch ships (``releases.toml``), and whether the torch
and NumPy pair is one torch supports (``expectations/compat.toml``).
"""

import dataclasses
import re

from packaging.version import InvalidVersion, Version

from ..matrix import versions
from ..matrix.values import Target

_V = r"(\d+(?:\.\d+)+(?:[.+\w-]*\w)?)"
PATTERNS = (
    ("torch", re.compile(r"PyTorch version(?: \(GPU\?\))?: " + _V)),
    ("cuda_build", re.compile(r"CUDA used to build PyTorch: (\d+\.\d+)")),
    ("nccl", re.compile(r"NCCL version (\d+\.\d+\.\d+)")),
    ("driver", re.compile(r"(?:Driver Version|Nvidia driver version): (\d+\.\d+(?:\.\d+)?)")),
    ("driver_cuda", re.compile(r"CUDA Version: (\d+\.\d+)")),
    ("driver_cuda", re.compile(r"cudaDriverVersion (\d{4,6})\b")),
    ("driver_cuda", re.compile(r"NVIDIA driver on your system is too old \(found version (\d{4,6})\)")),
    ("python", re.compile(r"Python version: (\d+\.\d+\.\d+)")),
    ("numpy", re.compile(r"Numpy version: (\d+\.\d+(?:\.\d+)?)")),
    # NCCL_DEBUG=INFO: the transport NCCL chose between two ranks (P2P/IPC, P2P/CUMEM,
    # SHM/direct, NET/IB/0/GDRDMA, NET/Socket/1...), and P2P it could not use
    ("nccl_transport", re.compile(r"NCCL INFO (?:Channel|Ring) \d+(?:/\d+)? : .* via "
                                  r"((?:P2P|SHM|NET)/[A-Za-z]+|direct shared memory)")),
    ("nccl_transport", re.compile(r"NCCL INFO (P2P is disabled) between connected GPUs")),
)
LABELS = {"torch": "torch", "cuda_build": "CUDA (torch built with)", "nccl": "NCCL",
          "driver": "NVIDIA driver", "driver_cuda": "CUDA the driver supports",
          "python": "Python", "numpy": "NumPy", "nccl_transport": "NCCL transport"}
_WORTH = ("version", "Version", " via ", "P2P is disabled")


def _api_version(text):
    """'12020' (cudaDriverGetVersion) → '12.2'; '12.2' stays."""
    if "." in text:
        return text
    n = int(text)
    return "%d.%d" % (n // 1000, (n % 1000) // 10)


class Facts:
    """What each rank or host printed: {fact: {value: [first line number, where]}}."""

    def __init__(self):
        self.seen = {}
        self.nccl_info = False  # the log holds NCCL_DEBUG=INFO output

    def feed(self, line, file):
        if not self.nccl_info and "NCCL INFO" in line.text:
            self.nccl_info = True
        if not any(w in line.text for w in _WORTH):
            return
        for name, pattern in PATTERNS:
            for m in pattern.finditer(line.text):
                value = m.group(1)
                if name == "driver_cuda":
                    value = _api_version(value)
                entry = self.seen.setdefault(name, {}).setdefault(
                    value, {"line": "%s:%d" % (file, line.number), "ranks": set(),
                            "hosts": set()})
                if line.rank is not None:
                    entry["ranks"].add(line.rank)
                if line.host:
                    entry["hosts"].add(line.host)

    def values(self, name):
        return list(self.seen.get(name, {}))

    def one(self, name):
        """The value when the log shows exactly one, else None."""
        found = self.values(name)
        return found[0] if len(found) == 1 else None

    def to_list(self):
        out = []
        for name, values in self.seen.items():
            for value, where in values.items():
                out.append({"fact": name, "label": LABELS[name], "value": value,
                            "line": where["line"], "ranks": sorted(where["ranks"]),
                            "hosts": sorted(where["hosts"])})
        return out


@dataclasses.dataclass
class Judgement:
    fact: str
    verdict: str  # "ok", "note" or "problem"
    text: str

    def to_dict(self):
        return dataclasses.asdict(self)


def _version(text):
    try:
        return Version(text)
    except InvalidVersion:
        return None


def judge(facts, matrix):
    """[Judgement] of the versions in ``facts`` against ``matrix``."""
    out = []
    torch = facts.one("torch")
    release = variant = None
    if torch and _version(torch):
        release = matrix.release(torch)
        if release is None:
            out.append(Judgement("torch", "note", "torch %s is not a release the matrix knows "
                                 "(it knows %s to %s)" % (torch, matrix.releases[0].series,
                                                          matrix.releases[-1].series)))
        variant = versions.local_variant(torch)
        if variant is None and facts.one("cuda_build"):
            variant = versions.variant_for_cuda(facts.one("cuda_build"))
        if release is not None:
            out.append(Judgement("torch", "ok", "torch %s: release %s, which the matrix knows"
                                 "%s" % (torch, release.series,
                                         " (build %s)" % variant if variant else "")))
    build_cuda = facts.one("cuda_build") or (
        "%s.%s" % (variant[2:-1], variant[-1]) if variant and variant.startswith("cu") else None)
    out += _driver(facts, matrix, build_cuda)
    out += _nccl(facts, release, variant, torch)
    out += _numpy(facts, matrix, torch, variant)
    return out


def _driver(facts, matrix, build_cuda):
    out = []
    if not build_cuda:
        return out
    toolkit = matrix.toolkit(build_cuda)
    driver = facts.one("driver")
    if driver and toolkit is not None:
        try:
            have = versions.driver_tuple(driver)
            floor = versions.driver_tuple(toolkit.compat_driver)
        except ValueError:
            return out
        if have < floor:
            out.append(Judgement("driver", "problem", "NVIDIA driver %s is too old for CUDA %s "
                                 "(torch's build): CUDA %s needs a driver >= %s (cuda.toml)"
                                 % (driver, build_cuda, build_cuda.split(".")[0],
                                    toolkit.compat_driver)))
        else:
            out.append(Judgement("driver", "ok", "NVIDIA driver %s runs CUDA %s (needs >= %s)"
                                 % (driver, build_cuda, toolkit.compat_driver)))
        return out
    driver_cuda = facts.one("driver_cuda")
    if driver_cuda:
        have, need = _version(driver_cuda), _version(build_cuda)
        if have and need and have.major < need.major:
            out.append(Judgement("driver", "problem", "the driver supports CUDA %s, older than "
                                 "the CUDA %s torch was built with: a CUDA %d build needs a "
                                 "CUDA %d driver" % (driver_cuda, build_cuda, need.major,
                                                     need.major)))
        elif have and need:
            out.append(Judgement("driver", "ok", "the driver supports CUDA %s; torch was built "
                                 "with CUDA %s%s" % (driver_cuda, build_cuda,
                                                     " (minor-version compatibility)"
                                                     if have < need else "")))
    return out


def _nccl(facts, release, variant, torch):
    out = []
    found = facts.values("nccl")
    if len(found) != 1 or release is None or variant is None:
        return out
    bundled = release.variant(variant)
    if bundled is None or not bundled.nccl:
        return out
    if found[0] == bundled.nccl:
        out.append(Judgement("nccl", "ok", "NCCL %s is the one torch %s ships" % (found[0],
                                                                                 torch)))
    else:
        out.append(Judgement("nccl", "note", "NCCL %s is not the one torch %s ships (%s): "
                             "another libnccl is loaded (LD_LIBRARY_PATH, a system NCCL, "
                             "another nvidia-nccl wheel) or torch was built elsewhere"
                             % (found[0], torch, bundled.nccl)))
    return out


def _numpy(facts, matrix, torch, variant):
    numpy = facts.one("numpy")
    if not (numpy and torch and _version(torch)):
        return []
    target = Target(versions.parse_version(torch), variant or "cpu", facts.one("python"),
                    numpy=numpy)
    for e in matrix.expectations:
        if e.unsupported and e.numpy is not None and e.applies(target):
            return [Judgement("numpy", "problem", "torch %s with NumPy %s: %s"
                              % (torch, numpy, e.advice))]
    return []
