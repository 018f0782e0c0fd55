"""What the fsdp probe does to a model: shard it by units, take a training step, compare.

Units: the modules ``fully_shard`` is applied to before the root. A model that has an
``fsdp_units`` attribute (a list of submodules or of their dotted names, or a method
returning one) is sharded per those units, as TorchTitan shards one transformer block at
a time; otherwise per top-level child module that holds parameters. The root is always
sharded last (it takes the parameters no unit holds).

The reference for a step is the unsharded model given every rank's batch in one
process: the gradient data-parallel training computes, the mean over ranks of each
rank's gradient. Only imported inside probe functions (torch is imported at the top).
"""

import dataclasses

import torch

# Gradients and parameters after one step are compared with this tolerance, not bit for
# bit: the reduce-scatter sums the ranks' gradients in the order the backend chooses
# (and FSDP2 may divide before or after the sum), the reference sums them in rank order;
# float32 addition is not associative, so the last bits can differ. 1e-5 relative is
# about 80 float32 ulps: a real fault (a wrong shard, a missing or doubled reduction, a
# stale gradient) is off by the size of a gradient, orders of magnitude more.
RTOL = 1e-5
ATOL = 1e-6
LR = 1e-2


def units(model):
    """[(name, module)] that fully_shard is applied to before the root, and how chosen."""
    declared = getattr(model, "fsdp_units", None)
    if callable(declared) and not isinstance(declared, torch.nn.Module):
        declared = declared()
    if declared is not None:
        found = []
        names = {id(m): n for n, m in model.named_modules()}
        for item in declared:
            if isinstance(item, str):
                found.append((item, model.get_submodule(item)))
            elif isinstance(item, torch.nn.Module) and id(item) in names:
                found.append((names[id(item)], item))
            else:
                raise TypeError("fsdp_units holds %r, which is neither a submodule of the "
                                "model nor the dotted name of one" % (item,))
        return found, "fsdp_units"
    return [(n, m) for n, m in model.named_children()
            if any(True for _ in m.parameters())], "top-level children"


def shard(fsdp, model, mesh, offload=False):
    found, how = units(model)
    for _, module in found:
        fsdp.shard(module, mesh, offload)
    fsdp.shard(model, mesh, offload)
    return "%d %s + root" % (len(found), how)


def _tensors(obj):
    """The floating tensors of a model's output (tensor, tuple, dict, dataclass)."""
    if isinstance(obj, torch.Tensor):
        return [obj] if obj.is_floating_point() else []
    if isinstance(obj, dict):
        obj = list(obj.values())
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


def loss_of(output):
    found = _tensors(output)
    if not found:
        raise ValueError("the model's output holds no floating-point tensor to take a "
                         "loss of")
    return sum(t.float().pow(2).mean() for t in found)


def inputs_for(model, rank, device):
    """Rank ``rank``'s batch: the toy's own per-rank data, or the user's example_inputs
    (the same on every rank); None when the model gives no inputs."""
    if hasattr(model, "batch"):
        return model.batch(rank, device)
    example = getattr(model, "example_inputs", None)
    if example is None:
        return None
    example = example() if callable(example) else example
    if isinstance(example, torch.Tensor):
        example = (example,)
    return tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in example)


def make_optimizer(model):
    # AdamW as TorchTitan uses; foreach=False: the same kernels for DTensors and plain
    # tensors, so the step itself adds no difference between the two.
    return torch.optim.AdamW(model.parameters(), lr=LR, foreach=False)


def full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def step(model, optimizer, inputs):
    """One training step; returns the loss (a float) and the output's tensors."""
    output = model(*inputs)
    loss = loss_of(output)
    loss.backward()
    optimizer.step()
    return float(loss.detach()), [t.detach() for t in _tensors(output)]


def reference_step(model, optimizer, batches):
    """The unsharded step of data-parallel training: mean over ranks of their gradients.
    Returns each rank's output tensors before the step."""
    outputs = []
    for inputs in batches:
        out = model(*inputs)
        outputs.append([t.detach() for t in _tensors(out)])
        (loss_of(out) / len(batches)).backward()
    optimizer.step()
    return outputs


def compare(got, want):
    """(names that differ beyond the tolerance, max abs difference, bit-exact?)."""
    from ..checkpoint.files import same_bits

    bad, worst, exact = [], 0.0, True
    for name, w in want.items():
        g = full(got[name]).detach().to(w.device)
        if same_bits(g, w, torch):
            continue
        exact = False
        if g.shape != w.shape:
            bad.append("%s (shape %s, expected %s)" % (name, tuple(g.shape), tuple(w.shape)))
            continue
        diff = float((g.double() - w.double()).abs().max())
        worst = max(worst, diff)
        if not torch.allclose(g.double(), w.double(), rtol=RTOL, atol=ATOL, equal_nan=True):
            bad.append("%s (max difference %.3g)" % (name, diff))
    return bad, worst, exact


def grads(model):
    return {n: full(p.grad) for n, p in model.named_parameters() if p.grad is not None}


def params(model):
    return {n: full(p.detach()) for n, p in model.named_parameters()}
