"""What training scripts do with each model of tests/data/zoo.py, without envcheck: run
under torchrun (gloo, CPU). argv: the zoo file, then the factory names; ZOO_FSDP: the
models to shard with FSDP2 (default: all).

For each model, each capability is what a training script writes, and its outcome is
``ok`` or ``ErrorType: first line``; rank 0 prints one JSON line {model: {capability:
outcome}} for tests/test_model_zoo.py to set beside envcheck's answer. The FSDP2 units
are the ones each model's own stack shards by (TorchTitan's per-block loop, the blocks
Hugging Face names in _no_split_modules, a ResNet's stages), written out per model here,
not computed the way envcheck computes them.
"""

import copy
import importlib.util
import json
import os
import pickle
import shutil
import sys
import tempfile

import torch
import torch.distributed as dist

spec = importlib.util.spec_from_file_location("zoo", sys.argv[1])
zoo = importlib.util.module_from_spec(spec)
sys.modules["zoo"] = zoo  # as an imported module is: its classes pickle by name
spec.loader.exec_module(zoo)

dist.init_process_group("gloo")
RANK, WORLD = dist.get_rank(), dist.get_world_size()

# Where each model's own stack puts fully_shard, before the root.
UNITS = {
    "gpt2": lambda m: list(m.transformer.h),
    "llama": lambda m: list(m.model.layers),
    "vit": lambda m: list(m.vit.layers),
    "resnet": lambda m: list(m.resnet.encoder.stages),
    "titan_llama3": lambda m: list(m.layers.values()),
    "blocks": lambda m: list(m.blocks.values()),
    "group_holder": lambda m: list(m.layers),
}


def build(name):
    return getattr(zoo, name)()


def inputs(model):
    return model.example_inputs


def loss_of(output):
    if hasattr(output, "logits"):
        output = output.logits
    return output.float().pow(2).mean()


def same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def attempt(fn):
    """'ok', or the error, the same on every rank (the worst rank's)."""
    try:
        fn()
        mine = "ok"
    except Exception as exc:
        text = " ".join(str(exc).split())
        mine = "%s: %s" % (type(exc).__name__, text[:160])
    said = [None] * WORLD
    dist.all_gather_object(said, mine)
    return next((s for s in said if s != "ok"), "ok")


def must(condition, what):
    if not condition:
        raise AssertionError(what)


def check_model(name):
    out = {}
    model = build(name)
    from torch.nn.parallel import DistributedDataParallel as DDP

    state = {}

    def ddp_step():
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        loss_of(ddp(*inputs(model))).backward()
        opt.step()
        state["ddp"] = ddp

    out["ddp"] = attempt(ddp_step)
    ddp = state.get("ddp")

    def deepcopy():
        ema = copy.deepcopy(ddp.module)  # the EMA pattern
        must(same(ema, ddp.module), "the copy differs")
        copy.deepcopy(ddp)

    out["deepcopy"] = attempt(deepcopy)

    def pickles():
        loaded = pickle.loads(pickle.dumps(ddp))
        must(same(loaded.module, ddp.module), "the unpickled model differs")

    out["pickle"] = attempt(pickles)

    def state_dict():
        fresh = build(name)
        fresh.load_state_dict(ddp.module.state_dict())
        must(same(fresh, ddp.module), "the fresh model differs after load_state_dict")
        path = os.path.join(tempfile.mkdtemp(), "w.pt")
        torch.save(ddp.module.state_dict(), path)
        again = build(name)
        again.load_state_dict(torch.load(path, weights_only=True))
        must(same(again, ddp.module), "torch.load gave other weights")

    out["state_dict"] = attempt(state_dict)
    out["fsdp"], out["dcp"] = fsdp_and_dcp(name)
    return out


def fsdp_and_dcp(name):
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    import torch.distributed.checkpoint as dcp

    mesh = init_device_mesh("cpu", (WORLD,))

    def sharded():
        m = build(name)
        for unit in UNITS[name](m):
            fully_shard(unit, mesh=mesh)
        fully_shard(m, mesh=mesh)
        return m

    state = {}

    def train():
        ref = build(name)
        loss_of(ref(*inputs(ref))).backward()
        m = sharded()
        loss_of(m(*inputs(m))).backward()  # every rank the same batch: the mean is it
        grads = {n: p.grad.full_tensor() for n, p in m.named_parameters() if p.grad is not None}
        want = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
        must(set(grads) == set(want), "other parameters have gradients")
        bad = [n for n in want if not torch.allclose(grads[n], want[n], rtol=1e-5, atol=1e-6)]
        must(not bad, "gradients differ from the unsharded model's: %s" % bad[:3])
        state["model"] = m

    # FSDP2 only where the test compares it (ZOO_FSDP: names, comma-separated; unset:
    # every model); elsewhere the DCP round trip is the plain model's, as envcheck's
    # checkpoint probe makes it.
    wanted = os.environ.get("ZOO_FSDP")
    fsdp = attempt(train) if wanted is None or name in wanted.split(",") else "not run"

    where = [tempfile.mkdtemp(prefix="zoo-dcp-") if RANK == 0 else None]
    dist.broadcast_object_list(where)

    def round_trip():
        m = state.get("model") or build(name)
        saved = {k: v.full_tensor() if hasattr(v, "full_tensor") else v
                 for k, v in get_model_state_dict(m).items()}
        state["saved"] = saved
        dcp.save({"model": get_model_state_dict(m)}, checkpoint_id=where[0])
        fresh = sharded() if "model" in state else build(name)
        loaded = {"model": get_model_state_dict(fresh)}
        dcp.load(loaded, checkpoint_id=where[0])
        got = {k: v.full_tensor() if hasattr(v, "full_tensor") else v
               for k, v in loaded["model"].items()}
        must(all(torch.equal(saved[k], got[k]) for k in saved), "dcp.load gave other weights")

    out = attempt(round_trip)

    alone = dist.new_group(ranks=[0])  # every rank calls new_group; rank 0 is in it

    def reshard():
        # Resume at another world size: the N ranks' checkpoint loaded by one rank
        # (a group of its own) into a plain model, as a 1-rank restart does.
        plain = build(name)  # on every rank: a factory may make process groups
        if RANK != 0:
            return
        loaded = {"model": plain.state_dict()}
        dcp.load(loaded, checkpoint_id=where[0], process_group=alone)
        plain.load_state_dict(loaded["model"])
        mine = plain.state_dict()
        must(all(torch.equal(mine[k], v) for k, v in state["saved"].items()),
             "loaded at world size 1, the weights differ")

    dist.barrier()
    if out == "ok":
        out = attempt(reshard)
    dist.barrier()
    if RANK == 0:
        shutil.rmtree(where[0], ignore_errors=True)
    return fsdp, out


found = {name: check_model(name) for name in sys.argv[2:]}
sys.stdout.flush()
if RANK == 0:
    os.write(1, (json.dumps(found) + "\n").encode())
dist.destroy_process_group()
