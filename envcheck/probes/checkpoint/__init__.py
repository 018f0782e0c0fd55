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

Every file goes to a 0700 directory removed afterwards (``files``); DCP needs one
directory all ranks share, made by rank 0. With ``--model`` the round trips run on the
user's model instead of the built-in toy.
"""

import os
import re
import warnings

from ..shared.files import quiet_load
from ..shared.state import count_tensors, special_tensors
from ...core.text import first_line

_RESUME_ADVICE = (
    "checkpoints that pickle Python objects (here %(names)s) no longer load with "
    "torch.load(path). For files you trust: torch.load(path, weights_only=False). To keep "
    "weights_only=True, allowlist the classes: torch.serialization.add_safe_globals("
    "[%(objs)s]) once, or `with torch.serialization.safe_globals([%(objs)s]): "
    "torch.load(path)`%(verified)s. For new checkpoints, save plain types (vars(args)) "
    "instead of objects")


def probe_checkpoint(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist

    from . import dcp_checks
    from ..shared import agree
    from ..shared.files import own_prefix, shared_dir
    from ..shared.dcp import Dcp, DcpBroken, DcpMissing

    subject = _Subject(ctx, torch)
    with ctx.private_tmpdir(prefix=own_prefix()) as mine, shared_dir(ctx) as (shared, problem):
        files = []
        _save_load(ctx, subject, mine, files, torch)
        _weights_only(ctx, subject, mine, torch)
        _default_load(ctx, subject, mine, files, torch)

        dcp_skip = dcp_broken = None
        try:
            dcp = Dcp(torch)
        except DcpMissing as exc:
            dcp, dcp_skip = None, str(exc)
        except DcpBroken as exc:
            # It fails the first DCP check (the user's DCP code breaks the same way);
            # the later ones are skipped as for a torch without DCP.
            dcp, dcp_broken, dcp_skip = None, exc, str(exc)
        unshared = None
        if not dcp_skip and problem:
            dcp_skip = problem.message
            unshared = problem if problem.unshared else None
        # Checked before any DCP call: DCP fails on one rank and strands the others.
        gate = (None, []) if dcp_skip else agree.object_collectives(ctx, dist)
        saved = None
        with ctx.check("dcp_save_load") as c:
            if dcp_broken is not None:
                raise dcp_broken
            if unshared is not None and unshared.fail:
                c.fail(unshared.message, advice=unshared.advice)
            saved = dcp_checks.save_load(ctx, c, subject, dcp, dcp_skip, gate, shared, files,
                                         torch)
        saved = agree.agreed(ctx, saved)
        # The full reason is on dcp_save_load; the checks after it point there.
        broken = ("DCP's directory is not shared between the hosts: see "
                  "checkpoint.dcp_save_load" if unshared else
                  "torch.distributed.checkpoint is not usable here: see "
                  "checkpoint.dcp_save_load" if dcp_skip else
                  "DCP does not work here: see checkpoint.dcp_save_load" if gate[1] else None)
        on_model = broken or subject.skip or (
            None if saved else "DCP did not save and load: see checkpoint.dcp_save_load")
        with ctx.check("dcp_dedup") as c:
            dcp_checks.dedup(ctx, c, dcp, broken, shared, files, torch)
        with ctx.check("reshard_load") as c:
            dcp_checks.reshard_load(ctx, c, dcp, on_model, saved, mine, files, torch)
        skip, group, note = dcp_checks.async_setup(ctx, dcp, broken, torch)
        with ctx.check("async_save") as c:
            dcp_checks.async_save(ctx, c, subject, dcp, skip or on_model, group, note, shared,
                                  files, torch)
        with ctx.check("async_snapshot") as c:
            dcp_checks.async_snapshot(ctx, c, dcp, skip, group, shared, files, torch)
        _no_process_group(ctx, mine, files, torch)


class _Subject:
    """The model the round trips run on: the user's (--model) or the built-in toy."""

    def __init__(self, ctx, torch):
        from ...worker import toy
        from ...worker.gather import all_gather_ints
        from ...worker.user_model import describe_model, model_spec, user_model

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
        from ..shared.files import diff_state

        c.advice = "torch.save/torch.load does not give back what was saved: do not resume from it"
        state = dict(subject.train_state())
        special = special_tensors(torch, ctx.device)
        base = torch.arange(12, dtype=torch.float32, device=ctx.device).reshape(3, 4)
        state["tensors"] = dict(special, transposed=base.t(), tied_a=base, tied_b=base)
        path = os.path.join(mine, "state.pt")
        torch.save(state, path)
        files.append(("state.pt", path))
        loaded = quiet_load(torch, path)
        differ = diff_state(state, loaded, torch)
        if differ:
            c.fail("%d entries differ after torch.load: %s" % (len(differ), ", ".join(differ[:5])))
        t = loaded["tensors"]
        if t["tied_a"].data_ptr() != t["tied_b"].data_ptr():
            c.fail("two entries that shared one tensor (tied weights) came back as two copies")
        if t["transposed"].stride() != base.t().stride():
            c.fail("a transposed view came back with strides %s, expected %s"
                   % (t["transposed"].stride(), base.t().stride()))
        n = count_tensors(state, torch)
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
        from ..shared.files import diff_state

        state = dict(subject.train_state())
        state["tensors"] = special_tensors(torch, ctx.device)
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
    reason = first_line(text.split("WeightsUnpickler error:")[-1])
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

        from ..shared.files import diff_state

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
        quiet_load(torch, path, weights_only=True)
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
    from ..shared.files import diff_state

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


def _no_process_group(ctx, mine, files, torch):
    """Best practice: save state, not communication objects; rebuild, then load."""
    with ctx.check("no_process_group") as c:
        import torch.distributed as dist

        from ...worker import toy
        from ..shared.files import diff_state, group_globals, pickle_globals

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
        fresh.load_state_dict(quiet_load(torch, path, **kwargs)["model"])
        differ = diff_state(holder.state_dict(), fresh.state_dict(), torch)
        if differ:
            c.fail("a fresh module given the live group and the saved state differs: %s"
                   % ", ".join(differ[:5]))
        c.detail = ("%d checkpoint files refer to no ProcessGroup or DeviceMesh; a module "
                    "holding its group saved by state_dict() and loaded into a fresh one "
                    "built with the live group, bit-exact" % len(scanned))
