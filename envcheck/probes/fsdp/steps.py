"""What the fsdp probe does to a model: shard it by units, take a training step, compare.

Units: the modules ``fully_shard`` is applied to before the root. A model that has an
``fsdp_units`` attribute (a list of submodules or of their dotted names, or a method
returning one) is sharded per those units, as TorchTitan shards one transformer block at
a time. Otherwise envcheck chooses, as users do: a Hugging Face model per block (the
classes its ``_no_split_modules`` names, which is what Accelerate's and the HF Trainer's
transformer auto-wrap policy shards), any other model per top-level child module that
holds parameters, where a ModuleList or ModuleDict child (which fully_shard refuses: it
has no forward) gives each of its blocks a unit, as TorchTitan shards its layers. The
root is always sharded last (it takes the parameters no unit holds).

Tied parameters (GPT-2's embedding and lm_head are one Parameter) must live in one unit:
FSDP2 raises "Parameter 'lm_head.weight' is shared with a parameter already managed by
another FSDP group" in the first forward otherwise. A unit envcheck chose that holds only
some names of a tie is left out, so the tie falls to the root; units the user declared
are kept as declared (the error is then the user's own sharding's, and the advice says
which tie they split).

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
    blocks = _no_split_blocks(model)
    if blocks:
        found = blocks
        how = "%s blocks (_no_split_modules)" % "/".join(
            sorted({type(m).__name__ for _, m in blocks}))
    else:
        found = list(_children(model))
        containers = [n for n, m in model.named_children() if _container(m)]
        how = "top-level children" + (
            " (the blocks of %s, one unit each)" % ", ".join(containers) if containers else "")
    ties = tied(model)
    return [(n, m) for n, m in found if not split_ties(n, ties)], how


def _container(module):
    """A module fully_shard refuses ("does not support containers that do not implement
    forward"): ModuleList, ModuleDict, or any class that keeps nn.Module's forward."""
    return type(module).forward is torch.nn.Module.forward


def _children(module, prefix=""):
    """(name, module) of the children holding parameters, the blocks of a container
    child in its place, one unit each: what TorchTitan does for its ModuleDict of
    layers (``for block in model.layers.values(): fully_shard(block)``), and what a
    model with a ModuleList of blocks needs."""
    for name, child in module.named_children():
        if not any(True for _ in child.parameters()):
            continue
        if _container(child):
            yield from _children(child, prefix + name + ".")
        else:
            yield prefix + name, child


def _no_split_blocks(model):
    """The outermost submodules whose class a Hugging Face model names in
    ``_no_split_modules`` (its transformer blocks), in model order; [] otherwise."""
    classes = getattr(model, "_no_split_modules", None)
    if not classes or isinstance(classes, str):
        return []
    classes = {c for c in classes if isinstance(c, str)}
    found = []
    for name, module in model.named_modules():
        if not name or type(module).__name__ not in classes:
            continue
        if any(name.startswith(outer + ".") for outer, _ in found):
            continue
        if any(True for _ in module.parameters()):
            found.append((name, module))
    return found


def tied(model):
    """[[name, ...]]: the parameters reachable under more than one name (one Parameter
    object: tied weights), each list in model order."""
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def split_ties(unit, ties):
    """The ties that unit ``unit`` (a dotted module name) holds only part of."""
    inside = lambda n: n.startswith(unit + ".")  # noqa: E731
    return [g for g in ties if any(map(inside, g)) and not all(map(inside, g))]


def shard(fsdp, model, mesh, offload=False):
    """Shard per units, then the root; returns how, for a check's detail and data."""
    note = ties_note(model)  # before sharding: fully_shard renames the classes
    found, how = units(model)
    for _, module in found:
        fsdp.shard(module, mesh, offload)
    fsdp.shard(model, mesh, offload)
    return "%d %s + root%s" % (len(found), how, note)


def ties_note(model):
    """Where the model's tied parameters went, for the detail; "" when it has none."""
    ties = tied(model)
    if not ties:
        return ""
    found, _ = units(model)
    parts = []
    for group in ties:
        split = [n for n, _ in found if split_ties(n, [group])]
        owner = next((n for n, _ in found
                      if all(x.startswith(n + ".") for x in group)), "the root")
        parts.append("%s %s" % (" = ".join(group), "split by fsdp_units %s" % ", ".join(
            split) if split else "held by " + owner))
    return "; tied " + ", ".join(parts)


def split_advice(model):
    """Advice for a sharded step that failed, from how the model was split."""
    ties = tied(model)
    found, how = units(model)
    split = sorted({" = ".join(g) for n, _ in found for g in split_ties(n, ties)})
    if split:
        return ("your fsdp_units put tied parameters (%s) in different units, which FSDP2 "
                "cannot shard: put every module holding a tie in one unit "
                "(fully_shard([module_a, module_b])), or leave them out of fsdp_units so "
                "that the root holds them" % ", ".join(split))
    if how == "fsdp_units":
        return None
    return ("envcheck sharded the model itself, per %s: if your training shards it "
            "otherwise, give the model an fsdp_units attribute listing the modules you "
            "pass to fully_shard (docs/fsdp.md), so that envcheck checks your sharding"
            % how)


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


def _seed(rank):
    # Dropout (GPT-2 has it in training mode) draws from the global generator: the
    # sharded rank r and the reference's forward of rank r's batch start from the same
    # state, so they draw the same masks (FSDP2 itself draws nothing).
    torch.manual_seed(1000 + rank)


def step(model, optimizer, inputs, rank):
    """One training step on rank ``rank``'s batch; returns the loss (a float) and the
    output's tensors."""
    _seed(rank)
    output = model(*inputs)
    loss = loss_of(output)
    loss.backward()
    optimizer.step()
    return float(loss.detach()), [t.detach() for t in _tensors(output)]


def reference_step(model, optimizer, batches):
    """The unsharded step of data-parallel training: mean over ranks of their gradients.
    Returns each rank's output tensors before the step."""
    outputs = []
    for rank, inputs in enumerate(batches):
        _seed(rank)
        out = model(*inputs)
        outputs.append([t.detach() for t in _tensors(out)])
        (loss_of(out) / len(batches)).backward()
    optimizer.step()
    return outputs


def compare(got, want):
    """(names that differ beyond the tolerance, max abs difference, bit-exact?)."""
    from ..shared.files import same_bits

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
