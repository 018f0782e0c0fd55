"""This node's NVIDIA GPUs and driver, read with nvidia-smi's CSV query (no torch).

No nvidia-smi on PATH means no NVIDIA GPU. An nvidia-smi that fails or prints
something unexpected is an error the user must see (a broken driver install is exactly
what they came to find), never a silent "no GPU".
"""

import dataclasses
import shutil
import subprocess

FIELDS = ("index", "name", "compute_cap", "driver_version", "memory.total")


class NvidiaSmiError(RuntimeError):
    pass


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str  # "8.0"
    driver: str
    memory_mib: int = None

    @property
    def sm(self):
        return "sm_" + self.compute_capability.replace(".", "")


def parse(text):
    gpus = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(FIELDS):
            raise NvidiaSmiError("nvidia-smi printed an unexpected line %d: %r" % (n, line))
        index, name, cap, driver, memory = parts
        try:
            major, minor = cap.split(".")
            int(major), int(minor)
            gpus.append(Gpu(int(index), name, cap, driver,
                            int(memory.split()[0]) if memory[:1].isdigit() else None))
        except ValueError:
            raise NvidiaSmiError("nvidia-smi printed an unexpected line %d: %r"
                                 % (n, line)) from None
    return gpus


def query(executable="nvidia-smi", timeout=10):
    """The GPUs nvidia-smi sees; [] when there is no nvidia-smi."""
    path = shutil.which(executable)
    if path is None:
        return []
    try:
        proc = subprocess.run(
            [path, "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits"],
            capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NvidiaSmiError("nvidia-smi did not answer within %d s" % timeout) from None
    except OSError as exc:
        raise NvidiaSmiError("nvidia-smi could not run: %s" % exc) from None
    if proc.returncode != 0:
        msg = (proc.stdout + proc.stderr).strip().splitlines()
        raise NvidiaSmiError("nvidia-smi failed (exit %d): %s"
                             % (proc.returncode, msg[0] if msg else "no output"))
    return parse(proc.stdout)
