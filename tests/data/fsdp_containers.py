"""What user code does with FSDP2 on a model whose blocks sit in a container, without
envcheck: run under torchrun (2 ranks, gloo). argv[1]: the model file (``build``).

Printed per rank, one JSON line: each way of sharding and whether a training step ran
(``ok: trained``) or the error (``ErrorType: first line``).
"""

import json
import os
import sys
import importlib.util

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

spec = importlib.util.spec_from_file_location("user_model", sys.argv[1])
user = importlib.util.module_from_spec(spec)
spec.loader.exec_module(user)

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
out = {}


def attempt(name, fn):
    try:
        out[name] = "ok: %s" % (fn(),)
    except Exception as exc:
        out[name] = "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:200])


def step(model):
    torch.manual_seed(1)
    model(*user.inputs()).sum().backward()
    return "trained"


def per_top_level_child():
    model = user.build()
    for child in model.children():
        if any(True for _ in child.parameters()):
            fully_shard(child, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return step(model)


def per_block():
    """As TorchTitan's apply_fsdp does: every block of the container, the other
    children, then the root."""
    model = user.build()
    for child in model.children():
        if not any(True for _ in child.parameters()):
            continue
        blocks = child.values() if isinstance(child, torch.nn.ModuleDict) else (
            child if isinstance(child, torch.nn.ModuleList) else [child])
        for block in blocks:
            fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return step(model)


attempt("shard_top_level_children", per_top_level_child)
attempt("shard_per_block", per_block)
sys.stdout.flush()
os.write(1, (json.dumps({"rank": dist.get_rank(), "outcomes": out}) + "\n").encode())
dist.destroy_process_group()
