"""This node's NVIDIA GPUs and driver, read with nvidia-smi's CSV query (no torch).

No nvidia-smi on PATH means no NVIDIA GPU. An nvidia-smi that fails or prints
something unexpected is an error the user must see (a broken driver install is exactly
what they came to find), never a silent "no GPU".

nvidia-smi before R510 does not know ``compute_cap``: an R470 driver answers
``Field "compute_cap" is not a valid field to query.`` and exits 2. Then the GPUs are
queried again without it, and ``resolve_name`` (the matrix's table of GPU names) gives
each GPU's compute capability.
"""

import dataclasses
import re
import shutil
from typing import Optional

from ..launch import procs

FIELDS = ("index", "name", "compute_cap", "driver_version", "memory.total")
_REFUSED = re.compile(r'Field "([^"]+)" is not a valid field to query')


class NvidiaSmiError(RuntimeError):
    pass


class FieldRefused(NvidiaSmiError):
    def __init__(self, field, line):
        super().__init__("nvidia-smi refused a field: %s" % line)
        self.field = field


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: Optional[str]  # "8.0"; None when nothing could tell
    driver: str
    memory_mib: int = None
    capability_from: str = "nvidia-smi"  # "nvidia-smi", "NVML" or "GPU name table"

    @property
    def sm(self):
        if self.compute_capability is None:
            return None
        return "sm_" + self.compute_capability.replace(".", "")


def parse(text, fields=FIELDS):
    gpus = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(fields):
            raise NvidiaSmiError("nvidia-smi printed an unexpected line %d: %r" % (n, line))
        row = dict(zip(fields, parts))
        try:
            cap = row.get("compute_cap")
            if cap is not None:
                major, minor = cap.split(".")
                int(major), int(minor)
            memory = row.get("memory.total", "")
            gpus.append(Gpu(int(row["index"]), row["name"], cap, row["driver_version"],
                            int(memory.split()[0]) if memory[:1].isdigit() else None))
        except ValueError:
            raise NvidiaSmiError("nvidia-smi printed an unexpected line %d: %r"
                                 % (n, line)) from None
    return gpus


def _run(path, fields, timeout):
    try:
        proc = procs.run(
            [path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
            capture_output=True, text=True, errors="replace", timeout=timeout)
    except procs.TimeoutExpired:
        raise NvidiaSmiError("nvidia-smi did not answer within %d s" % timeout) from None
    except OSError as exc:
        raise NvidiaSmiError("nvidia-smi could not run: %s" % exc) from None
    if proc.returncode != 0:
        msg = (proc.stdout + proc.stderr).strip().splitlines()
        refused = _REFUSED.search(proc.stdout + proc.stderr)
        if refused:
            raise FieldRefused(refused.group(1), refused.group(0))
        raise NvidiaSmiError("nvidia-smi failed (exit %d): %s"
                             % (proc.returncode, msg[0] if msg else "no output"))
    return proc.stdout


def query(executable="nvidia-smi", timeout=10, resolve_name=None):
    """The GPUs nvidia-smi sees; [] when there is no nvidia-smi.

    resolve_name(name) -> "8.0" or None: used when the driver's nvidia-smi cannot
    report compute capability. Without it, such GPUs carry compute_capability None
    (enough to count them)."""
    path = shutil.which(executable)
    if path is None:
        return []
    try:
        return parse(_run(path, FIELDS, timeout))
    except FieldRefused as exc:
        if exc.field != "compute_cap":
            raise
    old = tuple(f for f in FIELDS if f != "compute_cap")
    gpus = parse(_run(path, old, timeout), old)
    resolve = resolve_name or (lambda name: None)
    return [dataclasses.replace(g, compute_capability=resolve(g.name),
                                capability_from="GPU name table") for g in gpus]
