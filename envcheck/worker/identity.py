"""Who this rank is: its rank, local rank and world sizes, and which launcher said so.

A rank of ``envcheck run`` reads torchrun-style variables the supervisor set. Under a
launcher (``launched.py``) they come from torchrun (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE), or from srun's SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS /
SLURM_STEP_TASKS_PER_NODE, exported here under torchrun's names, since every probe reads
those. ``run_id`` tells one launched job's records from another's in the same directory.

stdlib only, like the rest of ``worker/``.
"""

import os
import re

from ..core.errors import UsageError


def read_identity():
    """(rank, local rank, world size, local world size) from torchrun-style env."""
    rank = _int_env("RANK")
    world_size = _int_env("WORLD_SIZE")
    return (rank, _int_env("LOCAL_RANK", rank), world_size,
            _int_env("LOCAL_WORLD_SIZE", world_size))


def _int_env(name, default=None):
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise SystemExit("envcheck worker: %s is not set" % name)
        return default
    return int(value)


def expand_tasks_per_node(value):
    """SLURM's '2(x3),1' -> [2, 2, 2, 1]."""
    counts = []
    for part in value.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not m:
            raise ValueError(value)
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


def _slurm_local_world(environ):
    node = int(environ.get("SLURM_NODEID", "0"))
    for name in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        if environ.get(name):
            counts = expand_tasks_per_node(environ[name])
            if node < len(counts):
                return counts[node]
    if environ.get("SLURM_NTASKS_PER_NODE"):
        return int(environ["SLURM_NTASKS_PER_NODE"])
    return int(environ["SLURM_NTASKS"]) // int(environ.get("SLURM_NNODES", "1"))


def export_identity(environ):
    """Which launcher started this rank; exports torchrun-style names under srun.

    torchrun's variables win when both are present (torchrun inside an srun step: the
    SLURM ids then describe the agent, not the rank). The probes read RANK & co. from
    the environment, so under srun they are exported from the SLURM ids.
    """
    if environ.get("RANK") is not None and environ.get("WORLD_SIZE") is not None:
        launcher = "torchrun" if environ.get("TORCHELASTIC_RUN_ID") else "env"
    elif environ.get("SLURM_PROCID") is not None and environ.get("SLURM_NTASKS"):
        launcher = "slurm"
        try:
            local_world = _slurm_local_world(environ)
        except (ValueError, KeyError) as exc:
            raise UsageError("cannot tell how many tasks run on this node from SLURM's "
                              "variables (%s); set LOCAL_WORLD_SIZE" % exc) from None
        environ["RANK"] = environ["SLURM_PROCID"]
        environ["WORLD_SIZE"] = environ["SLURM_NTASKS"]
        environ["LOCAL_RANK"] = environ.get("SLURM_LOCALID", "0")
        environ["LOCAL_WORLD_SIZE"] = str(local_world)
        environ["GROUP_RANK"] = environ.get("SLURM_NODEID", "0")
    elif any(name.startswith("ACCELERATE_") for name in environ):
        # accelerate launch without --multi_gpu (or --num_processes 1) runs the script
        # once, as a plain process: no RANK, no WORLD_SIZE. On CPU too, --multi_gpu is the
        # flag that makes it start several ranks (accelerate 1.15.0, observed).
        raise UsageError("started by accelerate launch as a single process (ACCELERATE_* "
                         "is set, RANK/WORLD_SIZE are not): add --multi_gpu, which starts "
                         "--num_processes ranks on CPU too: accelerate launch --multi_gpu "
                         "--num_processes 2 -m envcheck.worker.launched ...")
    else:
        raise UsageError("start this with torchrun or srun: neither RANK/WORLD_SIZE nor "
                          "SLURM_PROCID/SLURM_NTASKS is set (on one machine, use "
                          "'envcheck run')")
    missing = [n for n in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(n)]
    if missing:
        raise UsageError(
            "%s not set: under srun, export them before the step, e.g. "
            "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1) "
            "MASTER_PORT=29500" % " and ".join(missing))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        value = environ.get(name)
        if value is not None and not value.strip().isdigit():
            raise UsageError("%s=%r is not a non-negative integer" % (name, value))
    environ["ENVCHECK_LAUNCHER"] = launcher
    return launcher


def run_id(environ):
    """What tells this job's records from a previous job's in the same directory."""
    if environ.get("TORCHELASTIC_RUN_ID") not in (None, "", "none"):
        return "torchrun:%s" % environ["TORCHELASTIC_RUN_ID"]
    if environ.get("SLURM_JOB_ID"):
        return "slurm:%s.%s" % (environ["SLURM_JOB_ID"], environ.get("SLURM_STEP_ID", "0"))
    return "env:%s:%s" % (environ.get("MASTER_ADDR"), environ.get("MASTER_PORT"))
