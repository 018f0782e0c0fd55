"""Comparing a model with its copy (deepcopy, a fresh build loaded with the weights, a
framework's own copy): used by the serialization and frameworks probes."""

# nn.Module's own bookkeeping in a module's __dict__: never what stops a copy
_MODULE_STATE = frozenset(("_parameters", "_buffers", "_modules"))


def blockers(module, limit=5):
    """[(attribute path, type name)]: the attributes in ``module``'s tree that cannot be
    pickled (what deepcopy and pickle trip on), found by trying each one, in model
    order: ("blocks.0.sp_group", "ProcessGroup") for Open-Sora's STDiT."""
    import pickle

    found = []
    for prefix, sub in module.named_modules():
        for attr, value in vars(sub).items():
            if attr in _MODULE_STATE or value is None:
                continue
            try:
                pickle.dumps(value)
            except Exception:
                found.append(("%s.%s" % (prefix, attr) if prefix else attr,
                              type(value).__name__))
                if len(found) >= limit:
                    return found
    return found


def name_blockers(c, module, label, exc):
    """Put what stopped a copy of ``module`` in ``c``'s detail and data (the exception
    itself is left as it is, for the verdict): the attribute path and its type."""
    found = blockers(module)
    if not found:
        return
    c.data["blocked_by"] = ["%s (%s)" % f for f in found]
    c.detail = "%s: %s cannot be copied: %s" % (
        label, ", ".join(c.data["blocked_by"]), str(exc).strip().splitlines()[0][:200]
        if str(exc).strip() else type(exc).__name__)


MISMATCH_ADVICE = (
    "the copy does not match the original: after building the copy, load the weights "
    "explicitly (ema.load_state_dict(model.state_dict())) and verify before training")


def verify_copy(c, clone, original, torch, runner=None):
    """Fail ``c`` unless ``clone`` has the original's weights in its own memory and runs."""
    theirs = original.state_dict()
    mine = clone.state_dict()
    if set(mine) != set(theirs):
        c.fail("the copy has different entries: missing %s, extra %s"
               % (sorted(set(theirs) - set(mine))[:5], sorted(set(mine) - set(theirs))[:5]),
               advice=MISMATCH_ADVICE)
    differ = [k for k in theirs if not torch.equal(mine[k].cpu(), theirs[k].cpu())]
    if differ:
        c.fail("%d of %d tensors differ from the original: %s"
               % (len(differ), len(theirs), ", ".join(differ[:5])), advice=MISMATCH_ADVICE)
    originals = {p.data_ptr() for p in original.parameters() if p.numel()}
    shared = [n for n, p in clone.named_parameters() if p.numel() and p.data_ptr() in originals]
    if shared:
        c.fail("the copy shares memory with the original for %s: updating one changes "
               "the other" % ", ".join(shared[:5]), advice=MISMATCH_ADVICE)
    c.detail = "%d tensors equal, own memory" % len(theirs)
    c.detail += _forward(c, runner or clone, original, torch)


def _forward(c, runner, original, torch):
    inputs = _example_inputs(original, torch)
    if inputs is None:
        return ", no forward (no example_inputs)"
    modes = (runner.training, original.training)
    runner.eval()
    original.eval()
    try:
        with torch.no_grad():
            want = original(*inputs)
            got = runner(*inputs)
    finally:
        runner.train(modes[0])
        original.train(modes[1])
    found = difference(got, want, torch)
    if found:
        c.detail = ""  # the failure's own words, not the state-dict line before them
        c.fail("the copy's forward pass differs from the original's: %s" % found,
               advice=MISMATCH_ADVICE)
    return ", same output"


def forward_error(model, torch):
    """Why the model's forward on its own example_inputs fails ('its forward on
    example_inputs raised NotImplementedError: Module [Net] is missing the required
    "forward" function'), or None (it runs, or there are no example_inputs)."""
    try:
        inputs = _example_inputs(model, torch)
        if inputs is None:
            return None
        training = model.training
        model.eval()
        try:
            with torch.no_grad():
                model(*inputs)
        finally:
            model.train(training)
    except Exception as exc:
        text = str(exc).strip().splitlines()
        return "its forward on example_inputs raised %s: %s" % (
            type(exc).__name__, text[0][:200] if text else "")
    return None


def _example_inputs(model, torch):
    inputs = getattr(model, "example_inputs", None)
    if inputs is None:
        return None
    if callable(inputs):
        inputs = inputs()
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    device = next((p.device for p in model.parameters()), None)
    if device is None:
        return inputs
    return tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)


_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def difference(a, b, torch, path="output", depth=0, seen=None):
    """Where two model outputs differ, as training code would compare them, or None.

    Tensors bit for bit (NaN equals NaN), inside tuples, lists, dicts (Hugging Face's
    ModelOutput is one), dataclasses and plain objects (a KV cache) alike; plain values
    with ``==``; anything else is not compared: two copies of an object are never equal
    by identity, and that says nothing about the model.
    """
    seen = set() if seen is None else seen
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return "%s: a tensor on one side only" % path
        if a.shape != b.shape or a.dtype != b.dtype:
            return "%s: %s %s vs %s %s" % (path, tuple(a.shape), a.dtype, tuple(b.shape),
                                           b.dtype)
        a, b = a.detach().cpu(), b.detach().cpu()
        same = a == b
        if a.is_floating_point() or a.is_complex():
            same |= torch.isnan(a) & torch.isnan(b)
        if not bool(same.all()):
            return "%s: %d of %d elements differ" % (path, int((~same).sum()), same.numel())
        return None
    if depth > 8 or id(a) in seen:
        return None
    seen.add(id(a))
    if type(a) is not type(b):
        return "%s: %s vs %s" % (path, type(a).__name__, type(b).__name__)
    if isinstance(a, _PLAIN):
        return None if a == b or (a != a and b != b) else "%s: %r vs %r" % (path, a, b)
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return "%s: %d vs %d items" % (path, len(a), len(b))
        pairs = [("%s[%d]" % (path, i), x, y) for i, (x, y) in enumerate(zip(a, b))]
    elif isinstance(a, dict):
        if list(a) != list(b):
            return "%s: keys %s vs %s" % (path, list(a)[:5], list(b)[:5])
        pairs = [("%s.%s" % (path, k) if isinstance(k, str) else "%s[%r]" % (path, k),
                  a[k], b[k]) for k in a]
    elif hasattr(a, "__dict__"):
        # A dataclass or any plain object (a cache holding per-layer tensors): its fields.
        pairs = [("%s.%s" % (path, k), v, getattr(b, k, None)) for k, v in vars(a).items()
                 if not k.startswith("__")]
    else:
        return None
    for where, x, y in pairs:
        found = difference(x, y, torch, where, depth + 1, seen)
        if found:
            return found
    return None
