"""The state checkpoint checks save: values a bit-exact copy must keep, per-rank
entries whose values every rank can predict, and helpers to copy or blank nested state."""


def special_tensors(torch, device):
    """Values a bit-exact copy must keep: NaN, -0.0, inf, subnormals, every common dtype."""
    f32 = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf"), 1e-45, 3.4e38,
                        1.0 / 3.0], dtype=torch.float32)
    return {
        "f32": f32.to(device),
        "bf16": f32.to(torch.bfloat16).to(device),
        "f16": torch.tensor([65504.0, -0.0, 6e-8, float("nan")], dtype=torch.float16).to(device),
        "f64": (torch.arange(6, dtype=torch.float64) / 7).to(device),
        "i64": torch.tensor([-2 ** 63, 2 ** 63 - 1, 0], dtype=torch.int64).to(device),
        "u8": torch.arange(256, dtype=torch.uint8).to(device),
        "bool": torch.tensor([True, False, True]).to(device),
    }


def count_tensors(obj, torch):
    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(count_tensors(v, torch) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(count_tensors(v, torch) for v in obj)
    return 0


def per_rank(torch, device, rank):
    return torch.full((5,), 10.0 * (rank + 1) + 0.5, device=device)


def map_leaves(obj, fn, is_leaf):
    """Apply fn to every leaf of a nested state dict; other values pass through."""
    if is_leaf(obj):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: map_leaves(v, fn, is_leaf) for k, v in obj.items()}
    return obj


def clone(obj, torch):
    return map_leaves(obj, lambda t: t.detach().clone(),
                      lambda o: isinstance(o, torch.Tensor))


def zeros(obj, torch):
    return map_leaves(obj, torch.zeros_like, lambda o: isinstance(o, torch.Tensor))


def local(obj):
    """DTensors compared by this rank's shard."""
    return map_leaves(obj, lambda t: t.to_local(), lambda o: hasattr(o, "to_local"))


def cpu(obj):
    return map_leaves(obj, lambda t: t.cpu(), lambda o: hasattr(o, "cpu"))
