"""Entry point of one rank: ``python -m envcheck.worker --plan PLAN.json --out DIR``.

Reads torchrun-style env (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), imports torch once, initialises the process group, runs the planned probes
one after another and streams records (see ``records.py``). SIGUSR1 makes it dump every
thread's Python stack to ``stacks-rank{RANK}.txt``: that is how the supervisor learns
where a hung rank is stuck, even inside a C++ collective.
"""

import argparse
import datetime
import faulthandler
import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
import time
import traceback

from .context import Context
from .records import RecordWriter, records_path, stacks_path

# Exit code of a rank whose process group could not be set up; the reason is in its
# records, so the supervisor reports it as a failed setup, not as a crash.
EXIT_SETUP_FAILED = 3


def _int_env(name, default=None):
    value = os.environ.get(name)
    if value is None or value == "":
        if default is None:
            raise SystemExit("envcheck worker: %s is not set" % name)
        return default
    return int(value)


def load_probe(entry):
    """The probe function named by a plan entry: a module name or a file path."""
    if entry.get("path"):
        name = "envcheck_user_probes_%x" % (hash(entry["path"]) & 0xFFFFFFFF)
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, entry["path"])
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    else:
        module = importlib.import_module(entry["module"])
    return getattr(module, entry["function"])


def _resolve_backend(torch, requested, local_rank):
    if requested != "auto":
        return requested
    if (torch.cuda.is_available() and local_rank < torch.cuda.device_count()
            and torch.distributed.is_nccl_available()):
        return "nccl"
    return "gloo"


def _error(exc):
    return {"type": type(exc).__name__, "message": str(exc),
            "traceback": traceback.format_exc()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="envcheck.worker")
    parser.add_argument("--plan", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with open(args.plan, encoding="utf-8") as f:
        plan = json.load(f)

    rank = _int_env("RANK")
    world_size = _int_env("WORLD_SIZE")
    local_rank = _int_env("LOCAL_RANK", rank)
    local_world_size = _int_env("LOCAL_WORLD_SIZE", world_size)

    # Segfaults print the Python stack to stderr, which the supervisor keeps the tail of.
    faulthandler.enable(file=sys.stderr, all_threads=True)
    stacks = open(stacks_path(args.out, rank), "w", encoding="utf-8")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)

    records = RecordWriter(records_path(args.out, rank), rank)
    host = socket.gethostname()
    start = time.monotonic()
    import torch
    import torch.distributed as dist
    records.write("hello", pid=os.getpid(), host=host, python=sys.executable,
                  torch_import_s=round(time.monotonic() - start, 3))

    from . import environment
    backend = _resolve_backend(torch, plan["backend"], local_rank)
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    mine = {"host": host, "pid": os.getpid(), "local_rank": local_rank, "device": str(device),
            "backend": backend,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if rank == 0:
        mine["environment"] = environment.collect(torch)
    records.write("env", **mine)

    timeout = float(plan["timeout"])
    records.write("setup_start", backend=backend)
    t0 = time.monotonic()
    try:
        if backend == "nccl":
            torch.cuda.set_device(device)
        dist.init_process_group(backend=backend, init_method="env://", rank=rank,
                                world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout))
    except Exception as exc:
        records.write("setup", outcome="failed", backend=backend,
                      seconds=round(time.monotonic() - t0, 6), error=_error(exc))
        records.close()
        sys.stderr.flush()
        os._exit(EXIT_SETUP_FAILED)
    ctx = Context(records, rank, local_rank, world_size, local_world_size, backend, device,
                  timeout, plan.get("options", {}), host)
    ctx.init_seconds = time.monotonic() - t0
    records.write("setup", outcome="passed", backend=backend,
                  seconds=round(ctx.init_seconds, 6))

    for entry in plan["probes"]:
        ctx.probe = entry["name"]
        records.write("probe_start", probe=entry["name"])
        p0 = time.monotonic()
        try:
            load_probe(entry)(ctx)
        except Exception as exc:
            # Outside any ctx.check(): the probe itself broke (or its file did not load).
            records.write("check", probe=entry["name"], check="run", outcome="failed",
                          seconds=round(time.monotonic() - p0, 6),
                          detail="%s: %s" % (type(exc).__name__, str(exc)[:200]),
                          error=_error(exc), advice=None, data={})
        records.write("probe_end", probe=entry["name"],
                      seconds=round(time.monotonic() - p0, 6))

    try:
        dist.destroy_process_group()
    except Exception:
        pass
    records.write("bye")
    records.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: torch's atexit and thread joins can take seconds, and
    # everything this rank had to say is already on disk.
    os._exit(0)


if __name__ == "__main__":
    main()
