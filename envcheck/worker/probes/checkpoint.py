"""checkpoint: can training state be saved here and resumed, bit for bit?

Training that cannot be resumed is lost training. Real failures behind these checks:

- torch 2.6 changed ``torch.load``'s default to ``weights_only=True``: resume checkpoints
  that pickle Python objects (an ``argparse.Namespace`` of hyper-parameters) stopped
  loading with ``torch.load(path)`` (torch's own error and the 2.6 release blog say so;
  observed on 2.4.1: loads with a FutureWarning, on 2.6.0: UnpicklingError).
- torch.distributed.checkpoint (DCP) plans every save across ranks and writes a tensor
  that several ranks hold only once: replicas that drifted apart are saved as one of
  them, without a word (TorchTitan's DCP notes); from torch 2.4 the copy kept is chosen
  per tensor to balance the writes, so a checkpoint can mix ranks (observed).
- DCP exchanges its plans with object collectives; the torch 2.13 CPU wheel without
  numpy fails them with ``RuntimeError: Numpy is not available``, on the coordinating
  rank only, leaving the others blocked. The DCP checks therefore try
  ``all_gather_object`` first, which fails on every rank alike.

Every file goes to a 0700 directory removed afterwards (``ckpt_files``); DCP needs one
directory all ranks share, made by rank 0. With ``--model`` the round trips run on the
user's model instead of the built-in toy.
"""

import os
import re
import warnings

_RESUME_ADVICE = (
    "checkpoints that pickle Python objects (here %(names)s) no longer load with "
    "torch.load(path). For files you trust: torch.load(path, weights_only=False). To keep "
    "weights_only=True, allowlist the classes: torch.serialization.add_safe_globals("
    "[%(objs)s]) once, or `with torch.serialization.safe_globals([%(objs)s]): "
    "torch.load(path)`%(verified)s. For new checkpoints, save plain types (vars(args)) "
    "instead of objects")
_DEDUP_ADVICE = ("make replicated state identical on every rank before a DCP save "
                 "(DDP keeps parameters so; broadcast from rank 0 what it does not cover)")
_SNAPSHOT_ADVICE = (
    "do not modify the state until async_save's future has completed (fut.result() "
    "before the next optimizer step), or hand async_save a copy "
    "({k: v.clone() for k, v in state.items()}): this torch stages %s tensors without "
    "copying them")


def probe_checkpoint(ctx):
    """torch.save/load incl. the weights_only default; DCP across ranks, replica dedup, other world size, async_save; no process group saved"""
    import torch
    import torch.distributed as dist

    from ..ckpt_files import own_prefix, shared_dir
    from ..dcp_api import Dcp, DcpMissing

    subject = _Subject(ctx, torch)
    with ctx.private_tmpdir(prefix=own_prefix()) as mine, shared_dir(ctx) as (shared, blind):
        files = []
        _save_load(ctx, subject, mine, files, torch)
        _weights_only(ctx, subject, mine, torch)
        _default_load(ctx, subject, mine, files, torch)

        dcp_skip = None
        try:
            dcp = Dcp(torch)
        except DcpMissing as exc:
            dcp, dcp_skip = None, str(exc)
        if not dcp_skip and blind:
            dcp_skip = ("rank(s) %s cannot see rank 0's directory %s: DCP needs a directory "
                        "every rank can reach; set ENVCHECK_CHECKPOINT_DIR to a shared "
                        "filesystem" % (",".join(map(str, blind)), shared))
        # Checked before any DCP call: DCP fails on one rank and strands the others.
        gate = (None, []) if dcp_skip else _object_collectives(ctx, dist)
        saved = _dcp_save_load(ctx, subject, dcp, dcp_skip, gate, shared, files, torch)
        broken = dcp_skip or ("DCP does not work here: see checkpoint.dcp_save_load"
                              if gate[1] else None)
        on_model = broken or subject.skip or (
            None if saved else "DCP did not save and load: see checkpoint.dcp_save_load")
        _dcp_dedup(ctx, dcp, broken, shared, files, torch)
        _reshard_load(ctx, dcp, on_model, saved, mine, files, torch)
        _async_save(ctx, subject, dcp, broken, on_model, shared, files, torch)
        _no_process_group(ctx, mine, files, torch)


class _Subject:
    """The model the round trips run on: the user's (--model) or the built-in toy."""

    def __init__(self, ctx, torch):
        from .. import toy
        from ..gather import all_gather_ints
        from ..model import describe_model, model_spec, user_model

        self.ctx, self.torch = ctx, torch
        self.spec = model_spec(ctx)
        self.skip = None
        self.model = None
        self._state = None
        if not self.spec:
            self.label = "toy model"
            self.model = toy.build_toy(0, ctx.device)
            self.fresh = lambda: toy.build_toy(1, ctx.device)
            return
        self.label = self.spec["spec"]
        self.fresh = lambda: user_model(ctx)
        with ctx.check("model") as c:
            c.advice = ("make %s import and return a torch.nn.Module in every rank, called "
                        "with no arguments or with rank=/device= (see the traceback)"
                        % self.spec["spec"])
            self.model = user_model(ctx)
            c.detail = "%s: %s on %s" % (self.label, describe_model(self.model), ctx.device)
        bad = [r for r, (ok,) in enumerate(all_gather_ints(ctx, [self.model is not None]))
               if not ok]
        if bad:
            self.skip = ("the model did not build on rank(s) %s (see checkpoint.model)"
                         % ",".join(map(str, bad)))

    def train_state(self):
        """{"model", "optimizer"} after one deterministic Adam step, as a resume holds."""
        if self._state is not None:
            return self._state
        torch = self.torch
        params = [p for p in self.model.parameters() if p.requires_grad]
        state = {"model": self.model.state_dict()}
        if params:
            opt = torch.optim.Adam(params, lr=1e-3)
            for p in params:
                p.grad = torch.full_like(p, 0.01)
            opt.step()
            opt.zero_grad()
            state["optimizer"] = opt.state_dict()
        self._state = state
        return state


def _special_tensors(torch, device):
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


def _count_tensors(obj, torch):
    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(_count_tensors(v, torch) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_count_tensors(v, torch) for v in obj)
    return 0


def _quiet_load(torch, path, **kwargs):
    # torch 2.4/2.5 warn on every default load; that warning is default_load's subject.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(path, **kwargs)


def _has_weights_only(torch):
    import inspect

    try:
        return "weights_only" in inspect.signature(torch.load).parameters
    except (TypeError, ValueError):
        return False


def _save_load(ctx, subject, mine, files, torch):
    with ctx.check("save_load") as c:
        if subject.skip:
            c.skip(subject.skip)
        from ..ckpt_files import diff_state

        c.advice = "torch.save/torch.load does not give back what was saved: do not resume from it"
        state = dict(subject.train_state())
        special = _special_tensors(torch, ctx.device)
        base = torch.arange(12, dtype=torch.float32, device=ctx.device).reshape(3, 4)
        state["tensors"] = dict(special, transposed=base.t(), tied_a=base, tied_b=base)
        path = os.path.join(mine, "state.pt")
        torch.save(state, path)
        files.append(("state.pt", path))
        loaded = _quiet_load(torch, path)
        differ = diff_state(state, loaded, torch)
        if differ:
            c.fail("%d entries differ after torch.load: %s" % (len(differ), ", ".join(differ[:5])))
        t = loaded["tensors"]
        if t["tied_a"].data_ptr() != t["tied_b"].data_ptr():
            c.fail("two entries that shared one tensor (tied weights) came back as two copies")
        if t["transposed"].stride() != base.t().stride():
            c.fail("a transposed view came back with strides %s, expected %s"
                   % (t["transposed"].stride(), base.t().stride()))
        n = _count_tensors(state, torch)
        c.detail = ("%s: %d tensors bit-exact (model, optimizer, NaN/-0.0/inf/subnormal in "
                    "f32/bf16/f16, int64, uint8, bool), tied weights still shared, view "
                    "strides kept" % (subject.label, n))
        c.data = {"tensors": n, "bytes": os.path.getsize(path), "dir": mine}


def _weights_only(ctx, subject, mine, torch):
    with ctx.check("weights_only") as c:
        if subject.skip:
            c.skip(subject.skip)
        if not _has_weights_only(torch):
            c.skip("torch %s's torch.load has no weights_only argument (it arrived in "
                   "torch 1.13)" % torch.__version__)
        from ..ckpt_files import diff_state

        state = dict(subject.train_state())
        state["tensors"] = _special_tensors(torch, ctx.device)
        path = os.path.join(mine, "weights.pt")
        torch.save(state, path)
        try:
            loaded = torch.load(path, weights_only=True)
        except Exception as exc:
            refused = _refused_parts(torch, state, path)
            what = " and ".join(refused) or "combined"
            c.fail("torch.load(weights_only=True) refuses the %s state dict%s: %s"
                   % (what, "" if len(refused) == 1 else "s", _unpickler_reason(exc)),
                   advice="this torch's weights_only unpickler cannot read the %s state "
                          "dict: load it with weights_only=False (trusted files only) or "
                          "use a newer torch" % what)
        differ = diff_state(state, loaded, torch)
        if differ:
            c.fail("%d entries differ after torch.load(weights_only=True): %s"
                   % (len(differ), ", ".join(differ[:5])))
        c.detail = ("%s: model%s state dicts load with weights_only=True, bit-exact"
                    % (subject.label, " and optimizer" if "optimizer" in state else ""))


def _refused_parts(torch, state, path):
    refused = []
    for key, part in state.items():
        torch.save(part, path)
        try:
            torch.load(path, weights_only=True)
        except Exception:
            refused.append(key)
    return refused


def _unpickler_reason(exc):
    import pickletools

    text = str(exc)
    reason = text.split("WeightsUnpickler error:")[-1].strip().splitlines()[0][:200]
    m = re.search(r"Unsupported operand (\d+)", reason)
    if m:
        op = pickletools.code2op.get(chr(int(m.group(1))))
        if op is not None:
            reason += " (pickle opcode %s%s)" % (op.name, ": Python floats, e.g. the "
                                                "optimizer's learning rate"
                                                if op.name == "BINFLOAT" else "")
    return reason


def _default_load(ctx, subject, mine, files, torch):
    """torch.load(path) with default arguments of a resume checkpoint holding objects."""
    with ctx.check("default_load") as c:
        if subject.skip:
            c.skip(subject.skip)
        import argparse

        from ..ckpt_files import diff_state

        state = subject.train_state()
        ckpt = dict(state, args=argparse.Namespace(lr=1e-3, batch_size=32, model=subject.label),
                    step=1234, epoch=3)
        path = os.path.join(mine, "resume.pt")
        torch.save(ckpt, path)
        files.append(("resume.pt", path))
        forced = {k: os.environ[k] for k in ("TORCH_FORCE_WEIGHTS_ONLY_LOAD",
                                             "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
                  if os.environ.get(k)}
        c.data = {"torch": torch.__version__, "forced_by_env": forced}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                loaded, error = torch.load(path), None
            except Exception as exc:
                loaded, error = None, exc
        if error is not None and "weights only load failed" not in str(error).lower():
            raise error
        c.data["default_weights_only"] = error is not None
        forced_note = (" (forced by %s)" % ", ".join("%s=%s" % kv for kv in forced.items())
                       if forced else "")
        if error is None:
            differ = diff_state(ckpt, loaded, torch)
            if differ:
                c.fail("%d entries differ after torch.load: %s"
                       % (len(differ), ", ".join(differ[:5])))
            future = any(issubclass(w.category, FutureWarning) and "weights_only" in
                         str(w.message) for w in caught)
            c.data["future_warning"] = future
            c.detail = ("torch.load(path) loads pickled objects: weights_only=False is the "
                        "default here%s" % forced_note)
            if future:
                c.detail += ", with a FutureWarning that it will become True"
            c.detail += _would_refuse(c, torch, path)
            return
        names = _unsafe_names(torch, path, error)
        objs = _resolve(names)
        c.data["unsafe_globals"] = names
        c.data["fixes"] = fixes = _try_fixes(torch, path, ckpt, objs)
        verified = [k for k, v in fixes.items() if v == "loads, bit-exact"]
        c.detail = ("torch %s: torch.load(path) refuses a checkpoint holding %s: "
                    "weights_only=True is the default%s (since torch 2.6)"
                    % (torch.__version__, ", ".join(names) or "non-tensor objects",
                       forced_note))
        c.fail("torch.load(path) refuses this resume checkpoint (UnpicklingError: Weights "
               "only load failed): torch %s defaults to weights_only=True%s (the default "
               "changed in torch 2.6) and the file holds %s"
               % (torch.__version__, forced_note, ", ".join(names) or "non-tensor objects"),
               advice=_RESUME_ADVICE % {
                   "names": ", ".join(names) or "non-tensor objects",
                   "objs": ", ".join(names) or "YourClass",
                   "verified": " (verified here: %s)" % ", ".join(verified) if verified else ""})


def _would_refuse(c, torch, path):
    """On a torch that still defaults to False: what weights_only=True makes of the file."""
    if not _has_weights_only(torch):
        return "; torch.load has no weights_only yet"
    try:
        _quiet_load(torch, path, weights_only=True)
    except Exception as exc:
        names = _unsafe_names(torch, path, exc)
        c.data["unsafe_globals"] = names
        if names:
            return ("; with weights_only=True (the default from torch 2.6) it would be "
                    "refused for %s: pass weights_only=False for trusted files or "
                    "allowlist with torch.serialization.add_safe_globals" % ", ".join(names))
        return ("; with weights_only=True (the default from torch 2.6) this torch refuses "
                "it: %s" % _unpickler_reason(exc))
    return "; it also loads with weights_only=True"


def _unsafe_names(torch, path, exc):
    get = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)
    if get is not None:
        try:
            return sorted(get(path))
        except Exception:
            pass
    text = str(exc)
    return sorted(set(re.findall(r"GLOBAL ([\w.]+)", text)
                      + re.findall(r"Unsupported class ([\w.]+)", text)))


def _resolve(names):
    import importlib

    objs = []
    for name in names:
        module, _, attr = name.rpartition(".")
        try:
            objs.append(getattr(importlib.import_module(module), attr))
        except Exception:
            pass
    return objs


def _try_fixes(torch, path, ckpt, objs):
    """Run the two documented fixes for real; what each gave."""
    from ..ckpt_files import diff_state

    def attempt(load):
        try:
            loaded = load()
        except Exception as exc:
            return "fails: %s" % _unpickler_reason(exc)
        return "fails: entries differ" if diff_state(ckpt, loaded, torch) else "loads, bit-exact"

    fixes = {"weights_only=False": attempt(lambda: torch.load(path, weights_only=False))}
    safe_globals = getattr(torch.serialization, "safe_globals", None)
    if safe_globals is not None and objs:
        def allowlisted():
            with safe_globals(objs):
                return torch.load(path)
        fixes["safe_globals"] = attempt(allowlisted)
    return fixes


def _object_collectives(ctx, dist):
    """(this rank's exception or None, ranks that failed): all_gather_object fails on
    every rank alike (after its collectives), unlike DCP's gather/scatter of plans."""
    from ..gather import all_gather_ints

    out = [None] * ctx.world_size
    try:
        dist.all_gather_object(out, {"rank": ctx.rank})
        error = None
    except Exception as exc:
        error = exc
    flags = all_gather_ints(ctx, [0 if error else 1])
    return error, [r for r, (ok,) in enumerate(flags) if not ok]


def _sharded(ctx, torch):
    """(full tensor, its Shard(0) DTensor, how) or (None, None, why not)."""
    from ..dcp_api import DcpMissing, sharding_api

    try:
        distribute_tensor, Shard, init_device_mesh, where = sharding_api(torch)
    except DcpMissing as exc:
        return None, None, str(exc)
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    full = (torch.arange(ctx.world_size * 6 * 4, dtype=torch.float32,
                         device=ctx.device).reshape(-1, 4) / 7)
    return full, distribute_tensor(full, mesh, [Shard(0)]), "%s DTensor Shard(0)" % where


def _per_rank(torch, device, rank):
    return torch.full((5,), 10.0 * (rank + 1) + 0.5, device=device)


def _dcp_state(ctx, subject, torch):
    """Replicated model state (identical on every rank), a per-rank entry, a DTensor."""
    state = {"model": subject.model.state_dict(),
             "tensors": _special_tensors(torch, ctx.device),
             "rank%d" % ctx.rank: _per_rank(torch, ctx.device, ctx.rank)}
    full, dt, how = _sharded(ctx, torch)
    if dt is not None:
        state["sharded"] = dt
    return state, full, how


def _sync_replicas(ctx, model, torch):
    """Broadcast rank 0's weights (as DDP does); True where the ranks' weights differed."""
    import hashlib

    import torch.distributed as dist

    from ..gather import all_gather_strings

    tensors = [t for t in model.state_dict().values()
               if isinstance(t, torch.Tensor) and t.dtype != torch.bool]
    sums = repr([float(t.detach().double().sum()) for t in tensors]).encode("utf-8")
    differed = len(set(all_gather_strings(ctx, hashlib.sha1(sums).hexdigest()))) > 1
    with torch.no_grad():
        for t in tensors:
            dist.broadcast(t, 0)
    return differed


def _dcp_save_load(ctx, subject, dcp, skip, gate, shared, files, torch):
    """What later checks need, when DCP saved and loaded on every rank; else None."""
    from ..ckpt_files import diff_state
    from ..diagnose import advice_for
    from ..gather import all_gather_ints

    result = None
    with ctx.check("dcp_save_load") as c:
        error, failed = gate
        if skip:
            c.skip(skip)
        if failed:
            if error is None:
                c.fail("DCP not run: dist.all_gather_object fails on rank(s) %s (see their "
                       "detail)" % ",".join(map(str, failed)))
            from ..diagnose import numpy_version

            importable, version = numpy_version()
            c.data = {"numpy_importable": importable, "numpy": version}
            first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
            if "Numpy is not available" in first:
                c.detail = ("%s: DCP cannot exchange its save/load plans (all_gather_object "
                            "raised RuntimeError: Numpy is not available)" % _numpy_problem())
            c.fail("DCP not run: it exchanges its save/load plans with object collectives, "
                   "and dist.all_gather_object raised %s: %s"
                   % (type(error).__name__, first), advice=advice_for(error))
        if subject.skip:
            c.skip(subject.skip)
        differed = _sync_replicas(ctx, subject.model, torch) if subject.spec else False
        state, full, how = _dcp_state(ctx, subject, torch)
        path = os.path.join(shared, "dcp")
        dcp.save(state, path)
        expected = _clone(state, torch)
        fresh = subject.fresh()
        with torch.no_grad():
            for t in fresh.state_dict().values():
                if isinstance(t, torch.Tensor):
                    t.zero_()
        target = {k: (fresh.state_dict() if k == "model" else _zeros(v, torch))
                  for k, v in state.items()}
        dcp.load(target, path)
        got = dict(target, model=fresh.state_dict())
        differ = diff_state(_local(expected), _local(got), torch)
        if differ:
            c.fail("%d entries differ after the DCP round trip on rank %d: %s"
                   % (len(differ), ctx.rank, ", ".join(differ[:5])))
        files.append(("dcp/.metadata", os.path.join(path, ".metadata")))
        names = sorted(os.listdir(path))
        c.detail = ("%s: saved by %d ranks, loaded into a fresh model, %d tensors bit-exact "
                    "on every rank (replicated, per-rank%s) with %s"
                    % (subject.label, ctx.world_size, _count_tensors(state, torch),
                       ", %s" % how if "sharded" in state else "", dcp.api))
        c.data = {"api": dcp.api, "files": names, "sharded": how if "sharded" in state else None,
                  "bytes": sum(os.path.getsize(os.path.join(path, n)) for n in names),
                  "dir": shared}
        if subject.spec:
            c.data["replicas_differed_before_sync"] = differed
            if differed:
                c.detail += ("; your model's ranks started with different weights: they were "
                             "made identical from rank 0 first (see dcp_dedup for why)")
        result = {"path": path, "full": full if "sharded" in state else None,
                  "model": expected["model"], "label": subject.label}
    flags = all_gather_ints(ctx, [1 if result else 0])
    return result if all(f for (f,) in flags) else None


def _numpy_problem():
    from ..diagnose import numpy_version

    importable, version = numpy_version()
    if not importable:
        return "numpy is not installed"
    return "numpy %s is installed but this torch cannot use it" % (version or "")


def _clone(obj, torch):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _clone(v, torch) for k, v in obj.items()}
    return obj


def _zeros(obj, torch):
    if isinstance(obj, torch.Tensor):
        return torch.zeros_like(obj)
    if isinstance(obj, dict):
        return {k: _zeros(v, torch) for k, v in obj.items()}
    return obj


def _local(obj):
    """DTensors compared by this rank's shard."""
    if hasattr(obj, "to_local"):
        return obj.to_local()
    if isinstance(obj, dict):
        return {k: _local(v) for k, v in obj.items()}
    return obj


def _dcp_dedup(ctx, dcp, skip, shared, files, torch):
    with ctx.check("dcp_dedup") as c:
        if skip:
            c.skip(skip)
        from ..gather import all_gather_ints

        c.advice = _DEDUP_ADVICE
        sizes = {"layer0.weight": 4096, "layer0.bias": 64, "layer1.weight": 1024,
                 "layer1.bias": 16}
        # The same names on every rank, different values: replicas that drifted apart.
        state = {k: torch.full((n,), float(ctx.rank + 1), device=ctx.device)
                 for k, n in sizes.items()}
        path = os.path.join(shared, "dedup")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dcp.save(state, path)
        files.append(("dedup/.metadata", os.path.join(path, ".metadata")))
        loaded = {k: torch.zeros_like(v) for k, v in state.items()}
        dcp.load(loaded, path)
        winners = {}
        for k, t in loaded.items():
            values = sorted(set(t.cpu().tolist()))
            ok = len(values) == 1 and values[0] in [float(r + 1) for r in range(ctx.world_size)]
            winners[k] = int(values[0]) - 1 if ok else -1
        everyone = all_gather_ints(ctx, list(winners.values()))
        c.data = {"api": dcp.api, "kept_from_rank": winners,
                  "warnings": sorted({"%s: %s" % (w.category.__name__,
                                                  str(w.message).splitlines()[0][:120])
                                      for w in caught})}
        torn = [k for k, w in winners.items() if w < 0]
        if torn:
            c.fail("replicas that differ were saved as a mix within one tensor: %s holds "
                   "values from several ranks" % ", ".join(torn))
        if any(row != everyone[0] for row in everyone):
            c.fail("ranks loaded different values for the same checkpoint: %s" % everyone)
        by_rank = {}
        for k, w in winners.items():
            by_rank.setdefault(w, []).append(k)
        kept = " and ".join("rank %d's values for %s" % (r, ", ".join(ks))
                            for r, ks in sorted(by_rank.items()))
        c.detail = ("hazard: replicas that differ are saved without an error or warning; "
                    "DCP kept %s, the other ranks' values are gone%s. Make replicas "
                    "identical before saving"
                    % (kept, " (one checkpoint mixes ranks)" if len(by_rank) > 1 else ""))


def _reshard_load(ctx, dcp, skip, saved, mine, files, torch):
    """The N-rank checkpoint of dcp_save_load, loaded by one process alone."""
    with ctx.check("reshard_load") as c:
        if skip:
            c.skip(skip)
        from ..ckpt_files import diff_state
        from ..dcp_api import DcpMissing

        path = saved["path"]
        expected = {"model": saved["model"], "tensors": _special_tensors(torch, ctx.device)}
        for r in range(ctx.world_size):
            expected["rank%d" % r] = _per_rank(torch, ctx.device, r)
        full = saved["full"]
        if full is not None:
            expected["sharded"] = full
        target = _zeros(expected, torch)
        try:
            how = dcp.load_alone(target, path)
        except DcpMissing as exc:
            c.skip(str(exc))
        differ = diff_state(expected, target, torch)
        if differ:
            c.fail("%d entries differ when one process loads the %d-rank checkpoint: %s"
                   % (len(differ), ctx.world_size, ", ".join(differ[:5])))
        c.detail = ("%s: the %d-rank checkpoint loaded by one process alone (%s), %d "
                    "tensors bit-exact%s" % (saved["label"], ctx.world_size, how,
                                             _count_tensors(expected, torch),
                                     ", the Shard(0) DTensor reassembled whole"
                                     if full is not None else ""))
        c.data = {"load": how, "world_size_saved": ctx.world_size, "world_size_loaded": 1}
        out = os.path.join(mine, "converted.pt")
        try:
            conv = dcp.to_torch_save(path, out)
        except DcpMissing as exc:
            c.data["convert"] = None
            c.detail += "; no conversion to torch.save: %s" % exc
            return
        files.append(("converted.pt", out))
        converted = _quiet_load(torch, out, map_location=ctx.device)
        differ = diff_state(_cpu(expected), _cpu({k: converted[k] for k in expected}), torch)
        if differ:
            c.fail("%d entries differ in the torch.save file from %s: %s"
                   % (len(differ), conv, ", ".join(differ[:5])))
        c.data["convert"] = conv
        c.detail += "; converted to one torch.save file (%s), bit-exact" % conv


def _cpu(obj):
    if hasattr(obj, "cpu"):
        return obj.cpu()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    return obj


def _async_save(ctx, subject, dcp, skip, on_model, shared, files, torch):
    import time

    import torch.distributed as dist

    from ..ckpt_files import diff_state

    if not skip and not hasattr(dcp.dcp, "async_save"):
        skip = "torch %s has no torch.distributed.checkpoint.async_save" % torch.__version__
    group, note = None, ""
    if not skip and ctx.backend != "gloo":
        # async_save stages through the CPU: it refuses a group without a CPU backend.
        group = dist.new_group(backend="gloo")
        note = " (on a gloo group: async_save needs a CPU-capable process group)"

    with ctx.check("async_save") as c:
        if skip or on_model:
            c.skip(skip or on_model)
        state = {"model": subject.model.state_dict(),
                 "tensors": _special_tensors(torch, ctx.device),
                 "rank%d" % ctx.rank: _per_rank(torch, ctx.device, ctx.rank)}
        expected = _clone(state, torch)
        path = os.path.join(shared, "async")
        t0 = time.monotonic()
        future = dcp.async_save(state, path, group)
        returned = time.monotonic() - t0
        future.result(timeout=ctx.timeout)
        done = time.monotonic() - t0
        files.append(("async/.metadata", os.path.join(path, ".metadata")))
        target = _zeros(expected, torch)
        dcp.load(target, path)
        differ = diff_state(expected, target, torch)
        if differ:
            c.fail("%d entries differ after async_save and load: %s"
                   % (len(differ), ", ".join(differ[:5])))
        c.detail = ("%s: dcp.async_save returned in %.3f s, its future completed in %.3f "
                    "s; %d tensors loaded back bit-exact on every rank%s"
                    % (subject.label, returned, done, _count_tensors(state, torch), note))
        c.data = {"returned_s": round(returned, 6), "completed_s": round(done, 6)}

    with ctx.check("async_snapshot") as c:
        if skip:
            c.skip(skip)
        c.advice = _SNAPSHOT_ADVICE % ctx.device.type
        # Large enough that the writer thread cannot be done before the next line runs.
        state = {"weights": torch.full((1 << 20,), 1.0, device=ctx.device)}
        path = os.path.join(shared, "snapshot")
        future = dcp.async_save(state, path, group)
        state["weights"].fill_(2.0)  # the next optimizer step, before the save completes
        future.result(timeout=ctx.timeout)
        files.append(("snapshot/.metadata", os.path.join(path, ".metadata")))
        target = {"weights": torch.zeros_like(state["weights"])}
        dcp.load(target, path)
        values = sorted(set(target["weights"].cpu().unique().tolist()))
        c.data = {"values_saved": values, "device": ctx.device.type}
        if values == [2.0]:
            c.fail("the checkpoint holds values written after async_save returned: this "
                   "torch did not copy the %s tensors when it staged them" % ctx.device.type)
        if values != [1.0]:
            c.fail("torn checkpoint: it mixes values from before and after async_save "
                   "returned (%s)" % values)
        c.detail = ("async_save copied the %s state when called: an update right after it "
                    "returned did not reach the checkpoint" % ctx.device.type)


def _no_process_group(ctx, mine, files, torch):
    """Best practice: save state, not communication objects; rebuild, then load."""
    with ctx.check("no_process_group") as c:
        import torch.distributed as dist

        from .. import toy
        from ..ckpt_files import diff_state, group_globals, pickle_globals

        c.advice = ("save state dicts, not modules or objects that hold a process group: "
                    "torch.save(model.state_dict(), path); after a restart, build the model "
                    "and the process group, then load_state_dict")
        torch.manual_seed(0)
        holder = toy.GroupHoldingNet(dist.group.WORLD).to(ctx.device)
        path = os.path.join(mine, "group_holder.pt")
        torch.save({"model": holder.state_dict()}, path)
        scanned, bad = {}, {}
        for where, f in [("group_holder.pt", path)] + files:
            if not os.path.exists(f):
                continue
            names = pickle_globals(f)
            scanned[where] = len(names)
            if group_globals(names):
                bad[where] = group_globals(names)
        c.data = {"globals_per_file": scanned}
        if bad:
            c.fail("checkpoint files refer to communication objects: %s"
                   % "; ".join("%s: %s" % (k, ", ".join(v)) for k, v in bad.items()))
        torch.manual_seed(1)
        fresh = toy.GroupHoldingNet(dist.group.WORLD).to(ctx.device)
        kwargs = {"weights_only": True} if _has_weights_only(torch) else {}
        fresh.load_state_dict(_quiet_load(torch, path, **kwargs)["model"])
        differ = diff_state(holder.state_dict(), fresh.state_dict(), torch)
        if differ:
            c.fail("a fresh module given the live group and the saved state differs: %s"
                   % ", ".join(differ[:5]))
        c.detail = ("%d checkpoint files refer to no ProcessGroup or DeviceMesh; a module "
                    "holding its group saved by state_dict() and loaded into a fresh one "
                    "built with the live group, bit-exact" % len(scanned))
