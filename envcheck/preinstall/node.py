"""This node, as a pre-install check sees it: Python, glibc, OS/arch, driver and GPUs.

Read without torch (NVML or nvidia-smi: ``discovery.py``; ``os.confstr``, ``platform``),
each value overridable (``--python-version``, ``--driver``, ``--gpu``, ``--glibc``) to
plan for another node. The GPUs are not looked up at all when both the driver and the
GPUs are given.
"""

import dataclasses
import platform
import re
import shutil
import sys
import sysconfig
from typing import Optional, Tuple

from ..matrix import versions
from ..matrix.versions import sm_tuple
from . import discovery, nvidia_smi
from ..core.errors import UsageError
from ..core.host import glibc_version as _glibc  # the ranks report glibc the same way

_SM = re.compile(r"^(?:sm_?)?(\d{1,2})(\d)([af]?)$|^(\d{1,2})\.(\d)$", re.I)


@dataclasses.dataclass(frozen=True)
class NodeGpu:
    index: int
    name: str
    sm: str  # "sm_80"

    @property
    def capability(self):
        return sm_tuple(self.sm)


@dataclasses.dataclass(frozen=True)
class Node:
    python: str  # "3.11", or "3.13t" for a free-threaded build
    python_full: str  # "3.11.7"; equals python when given with --python-version
    system: str  # platform.system(): "Linux"
    machine: str  # "x86_64"
    glibc: Optional[str]
    driver: Optional[str]
    gpus: Tuple[NodeGpu, ...]
    given: Tuple[str, ...] = ()  # which values came from flags: "python", "driver", "gpus"
    notes: Tuple[str, ...] = ()

    @property
    def platform(self):
        return {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(self.system)

    @property
    def is_linux_x86_64(self):
        return self.system == "Linux" and self.machine in ("x86_64", "AMD64")

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["gpus"] = [dataclasses.asdict(g) for g in self.gpus]
        return d


def parse_gpu(text):
    """'sm_80', 'sm80', '80' or '8.0' → 'sm_80'; UsageError otherwise."""
    m = _SM.match(str(text).strip())
    if not m:
        raise UsageError("--gpu %r: give a compute capability like sm_80 or 8.0, or a GPU "
                         "name like \"NVIDIA B200\"" % text)
    if m.group(1):
        return "sm_%s%s%s" % (int(m.group(1)), m.group(2), m.group(3).lower())
    return "sm_%d%s" % (int(m.group(4)), m.group(5))


def _this_python():
    v = sys.version_info
    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return "%d.%d%s" % (v.major, v.minor, "t" if free else ""), platform.python_version()


def _capability(resolve_name):
    """name -> "8.0" from the matrix's GPU name table (gpus.toml), or None."""
    def resolve(name):
        sm = resolve_name(name) if resolve_name else None
        return "%d.%d" % sm_tuple(sm) if sm else None
    return resolve


def host(python_version=None, glibc=None, machine=None):
    """This node without its GPUs: Python, OS, arch and glibc, with the overrides. All
    that pip's choice of a wheel (and a requirement's markers) depends on, read without
    asking NVML or nvidia-smi."""
    given = []
    if python_version:
        try:
            python = python_full = versions.python_series(python_version)
        except ValueError as exc:
            raise UsageError("--python-version: %s" % exc) from None
        given.append("python")
    else:
        python, python_full = _this_python()
    if glibc:
        try:
            versions.driver_tuple(glibc)
            if not re.match(r"^\d+\.\d+$", glibc.strip()):
                raise ValueError
        except ValueError:
            raise UsageError("--glibc %r: give a glibc version like 2.17" % glibc) from None
        given.append("glibc")
    if machine:
        given.append("machine")
    return Node(python, python_full, platform.system() if not machine else "Linux",
                machine or platform.machine(), glibc.strip() if glibc else _glibc(), None,
                (), tuple(given))


def marker_environment(node):
    """The environment markers of a requirement see on this node (PEP 508 names, for
    packaging.markers.Marker.evaluate): its Python, OS and arch, not envcheck's own."""
    series = node.python.rstrip("t")
    full = node.python_full.rstrip("t")
    if full.count(".") < 2:
        full += ".0"  # --python-version 3.13 plans for 3.13.0
    return {"python_version": series, "python_full_version": full,
            "implementation_name": "cpython", "implementation_version": full,
            "platform_python_implementation": "CPython",
            "sys_platform": node.platform or node.system.lower(),
            "platform_system": node.system, "platform_machine": node.machine,
            "os_name": "nt" if node.system == "Windows" else "posix"}


def read(python_version=None, driver=None, gpus=(), nvidia_smi_exe="nvidia-smi",
         glibc=None, resolve_name=None, machine=None, machine_note=None):
    """This node with the given overrides; UsageError when nvidia-smi is broken.
    resolve_name(name) -> "sm_80": the matrix's GPU name table, for drivers whose
    nvidia-smi cannot report compute capability (and for ``--gpu "NVIDIA B200"``)."""
    base = host(python_version, glibc, machine)
    given, notes = list(base.given), [machine_note] if machine_note else []
    if driver:
        try:
            versions.driver_tuple(driver)
        except ValueError as exc:
            raise UsageError("--driver: %s" % exc) from None
        given.append("driver")
    node_gpus = tuple(_given_gpu(i, g, resolve_name) for i, g in enumerate(gpus))
    if gpus:
        given.append("gpus")
    if not (driver and gpus):
        try:
            found = discovery.discover(_capability(resolve_name), nvidia_smi_exe)
        except nvidia_smi.NvidiaSmiError as exc:
            raise UsageError("%s. Fix the driver install, or plan without it: "
                             "--driver VERSION --gpu sm_XY" % str(exc).rstrip(".")) from None
        notes += found.notes
        if not found.gpus:
            notes.append("no nvidia-smi on PATH: no NVIDIA GPU" if not
                         shutil.which(nvidia_smi_exe) else "nvidia-smi lists no GPU")
        elif not gpus:
            unknown = [g for g in found.gpus if g.sm is None]
            if unknown:
                g = unknown[0]
                raise UsageError(
                    "nvidia-smi %s cannot report compute capability (drivers before R510 "
                    "refuse compute_cap) and GPU %d %r is not in envcheck's GPU name table: "
                    "pip install nvidia-ml-py (NVML reports it), or give --gpu sm_XY"
                    % (g.driver, g.index, g.name))
            node_gpus = tuple(NodeGpu(g.index, g.name, g.sm) for g in found.gpus)
            via = {g.capability_from for g in found.gpus}
            if "GPU name table" in via:
                notes.append("nvidia-smi %s cannot report compute capability: taken from "
                             "the GPU's name (matrix/gpus.toml)" % found.gpus[0].driver)
        if not driver:
            driver = found.gpus[0].driver if found.gpus else None
    return dataclasses.replace(base, driver=driver, gpus=node_gpus, given=tuple(given),
                               notes=tuple(notes))


def _given_gpu(index, text, resolve_name):
    """--gpu sm_80 / 8.0, or a product name as nvidia-smi prints it ("NVIDIA B200"),
    whose compute capability comes from the matrix's GPU name table."""
    try:
        return NodeGpu(index, "--gpu", parse_gpu(text))
    except UsageError:
        sm = resolve_name(text) if resolve_name and re.search(r"[A-Za-z]{1,}\s*\d", text) \
            else None
        if not sm:
            raise
        return NodeGpu(index, str(text).strip(), sm)
