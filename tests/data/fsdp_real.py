"""What user code does with FSDP2, without envcheck: run under torchrun (2 ranks, gloo).

Each scenario is what users write; the outcome (``ok: ...`` or ``ErrorType: first
line``) is printed as one JSON line per rank, so that tests compare envcheck's verdict
with what really happens. argv[1]: the --model file (a factory ``build``).
"""

import copy
import importlib.util
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
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
        text = " ".join(str(exc).split())
        cut = text.find("exception occurred : (")
        out[name] = "%s: %s" % (type(exc).__name__,
                                text[cut + 23:].split("',)")[0] if cut >= 0 else text[:200])


def inputs(model):
    return model.example_inputs() if callable(model.example_inputs) else model.example_inputs


def per_child():
    model = user.build()
    for child in model.children():
        fully_shard(child, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model(*inputs(model)).logits.sum().backward()
    return "trained"


def per_block(model):
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


attempt("shard_top_level_children", per_child)
model = per_block(user.build())
attempt("shard_per_block", lambda: model(*inputs(model)).logits.sum().backward() or "trained")
attempt("ema_deepcopy", lambda: type(copy.deepcopy(model)).__name__)
attempt("ema_unsharded_load_state_dict", lambda: user.build().load_state_dict(model.state_dict()))


def full_state():
    ema = user.build()
    ema.load_state_dict(get_model_state_dict(model, options=StateDictOptions(
        full_state_dict=True)))
    return all(torch.equal(a, b.full_tensor()) for a, b in zip(
        ema.state_dict().values(), model.state_dict().values()))


attempt("ema_full_state_dict", full_state)


def lerp(ema):
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters()):
            e.lerp_(p, 0.1)
    return "updated"


def lerp_unsharded():
    ema = user.build()
    ema.load_state_dict(get_model_state_dict(model, options=StateDictOptions(
        full_state_dict=True)))
    return lerp(ema)


def lerp_sharded_alike():
    ema = per_block(user.build())
    ema.load_state_dict(model.state_dict())
    return lerp(ema)


# The EMA update a training loop runs after every step, on both EMA forms.
attempt("ema_lerp_unsharded", lerp_unsharded)
attempt("ema_lerp_sharded_alike", lerp_sharded_alike)


def divide_factor_one():
    # What TorchTitan's apply_fsdp does (disable_fsdp_gradient_division).
    m = per_block(user.build())
    for module in m.modules():
        if hasattr(module, "set_gradient_divide_factor"):
            module.set_gradient_divide_factor(1.0)
    m(*inputs(m)).logits.sum().backward()
    return "reduced"


attempt("divide_factor_one", divide_factor_one)


def divide_factor_one_force_sum():
    # The same, with sum-only reductions: the gradients must be the sum over the ranks
    # of each rank's gradient (every rank has the same batch here: world size times the
    # unsharded model's gradient).
    ref = user.build()
    ref(*inputs(ref)).logits.sum().backward()
    m = per_block(user.build())
    for module in m.modules():
        if hasattr(module, "set_gradient_divide_factor"):
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)
    m(*inputs(m)).logits.sum().backward()
    n = dist.get_world_size()
    return all(torch.allclose(p.grad.full_tensor(), r.grad * n, rtol=1e-5, atol=1e-6)
               for p, r in zip(m.parameters(), ref.parameters()))


attempt("divide_factor_one_force_sum", divide_factor_one_force_sum)
# One write of the whole line: two ranks' prints into torchrun's one pipe were seen
# run together on one line (CI).
sys.stdout.flush()
os.write(1, (json.dumps({"rank": dist.get_rank(), "outcomes": out}) + "\n").encode())
dist.destroy_process_group()
