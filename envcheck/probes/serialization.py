"""serialization: can the objects of a distributed job be pickled, deep-copied and saved?

Real failure: training scripts that build their EMA model with ``ema = deepcopy(model)``
died at start-up with ``TypeError: cannot pickle 'torch._C._distributed_c10d.ProcessGroup'
object`` (Open-Sora issues #28, #33 and #49, torch 2.1.2): a layer of the model kept its
sequence-parallel process group as an attribute, and a process group, a handle to live
connections, cannot be pickled or copied. The fixes are to build the EMA model fresh and
load the parameters into it (``load_state_dict``), or to deepcopy a model that holds no
group; the best practice is to keep communication objects out of anything that gets
copied or saved.

These checks do each of those operations for real in every rank of the job's process
group and report what this torch does, failures included with the real exception: the
version matrix, not this probe, says which failures are expected. With ``--model`` the
DDP checks run on the user's model instead of the built-in toy.
"""

from ..worker import leaving
from .shared.copies import MISMATCH_ADVICE, forward_error, name_blockers, verify_copy

_GROUP_ADVICE = (
    "a process group cannot be pickled or copied: keep it out of objects you copy, save or "
    "send to other processes; pass ranks (or look the group up where it is used) instead")
_COPY_ADVICE = (
    "do not deepcopy a model that stores a process group: build the EMA model fresh and "
    "copy the weights (ema = build_model(); ema.load_state_dict(model.state_dict())), or "
    "look the group up at call time instead of storing it on the module; under FSDP2 "
    "load full tensors instead (get_model_state_dict(model, options=StateDictOptions("
    "full_state_dict=True)): verified by fsdp.ema_copy)")
_DDP_COPY_ADVICE = (
    "do not deepcopy the DDP wrapper: build the copy fresh and load the weights "
    "(ema = build_model(); ema.load_state_dict(ddp.module.state_dict()))")
_SAVE_ADVICE = (
    "save weights, not modules: torch.save(model.state_dict(), path), and keep process "
    "groups out of anything you save")


def probe_serialization(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist

    subgroup = _process_group_checks(ctx, torch, dist)
    subject = _Subject(ctx, torch)
    _ddp_wrap(ctx, subject, torch)
    _ddp_copies(ctx, subject, torch)
    _save_module_with_group(ctx, subgroup or dist.group.WORLD, torch)


def _process_group_checks(ctx, torch, dist):
    """What torch does with process groups, always on built-in objects; the subgroup."""
    import copy
    import pickle

    from ..worker import toy

    with ctx.check("pickle_default_group") as c:
        c.advice = _GROUP_ADVICE
        world_group = dist.group.WORLD
        pickle.loads(pickle.dumps(world_group))
        c.detail = "%s pickled and unpickled" % type(world_group).__name__

    subgroup = None
    with ctx.check("pickle_subgroup") as c:
        c.advice = _GROUP_ADVICE
        # Every rank must call new_group, members or not; all ranks are members so
        # that every rank pickles a real group, not the non-member placeholder.
        subgroup = dist.new_group(ranks=list(range(ctx.world_size)))
        pickle.loads(pickle.dumps(subgroup))
        c.detail = "new_group of %d ranks pickled and unpickled" % ctx.world_size

    with ctx.check("deepcopy_module_with_group") as c:
        c.advice = _COPY_ADVICE
        torch.manual_seed(0)
        holder = toy.GroupHoldingNet(subgroup or dist.group.WORLD).to(ctx.device)
        clone = copy.deepcopy(holder)
        verify_copy(c, clone, holder, torch)
        c.detail = "module with .group: " + c.detail
    return subgroup


class _Subject:
    """The model under test (the user's with --model, else the toy), its DDP wrapper
    and EMA copy as the checks make them, and why the checks after a failure skip."""

    def __init__(self, ctx, torch):
        from ..worker import toy
        from ..worker.gather import all_gather_ints
        from ..worker.user_model import describe_model, model_spec, user_model

        self.ctx = ctx
        self.ddp = self.ema = None
        spec = model_spec(ctx)
        self.label = spec["spec"] if spec else "toy model"
        if not spec:
            self.model, self.skip = toy.build_toy(ctx.rank, ctx.device), None
            self._fresh = lambda seed: toy.build_toy(seed, ctx.device)
            return
        self.model = None
        with ctx.check("model") as c:
            c.advice = ("make %s import and return a torch.nn.Module in every rank, called "
                        "with no arguments or with rank=/device= (see the traceback)"
                        % spec["spec"])
            self.model = user_model(ctx)
            c.detail = "%s: %s on %s" % (spec["spec"], describe_model(self.model), ctx.device)
            c.data = {"class": "%s.%s" % (type(self.model).__module__,
                                          type(self.model).__qualname__),
                      "parameters": sum(p.numel() for p in self.model.parameters())}
            broken = forward_error(self.model, torch)
            if broken:
                # Here, once, in its own words: not later as a failed copy or a failed
                # fresh build, whose advice would blame the copy.
                self.model, c.detail = None, ""
                c.fail("%s: %s" % (spec["spec"], broken),
                       advice="give the model a forward that takes its example_inputs (or "
                              "drop example_inputs: copies are then compared by their "
                              "tensors only)")
        self.skip = _disagree(ctx, self.model is not None, all_gather_ints,
                              "the model did not load (see serialization.model)")
        self._fresh = lambda seed: user_model(ctx)

    def build_fresh(self, seed):
        """A new copy of the model, seeded differently on each rank (the toy's weights
        then differ until they are loaded)."""
        return self._fresh(seed)


def _ddp_wrap(ctx, subject, torch):
    from ..worker.gather import all_gather_ints

    with ctx.check("ddp_wrap") as c:
        if subject.skip:
            c.skip(subject.skip)
        c.advice = ("DistributedDataParallel(model) failed before any copy was made: every "
                    "rank must build the same model, with parameters that require grad")
        if ctx.world_size > 1 and leaving.ranks_disagree(ctx, subject.model):
            _disagreeing_ddp(ctx, c, subject)
        subject.ddp = _wrap_ddp(ctx, subject.model, torch)
        c.detail = "DistributedDataParallel(%s)" % subject.label
    if not subject.skip:
        subject.skip = _disagree(
            ctx, subject.ddp is not None, all_gather_ints,
            "DistributedDataParallel(model) failed (see serialization.ddp_wrap)")


def _disagreeing_ddp(ctx, c, subject):
    """The ranks' models differ in what DDP compares: DDP raises on some ranks and leaves
    the others blocked in its setup. Show what it does, on a subgroup a rank can leave
    (``worker/leaving.py``, as a training script's rank that exits on the error does), so
    that no rank waits in a collective of envcheck's making; the same words on every rank.
    DDP's verification does not depend on the device: it runs on CPU, over gloo."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = subject.model.to("cpu")
    tried = leaving.try_setup(ctx, leaving.fresh_group(ctx), "envcheck/serialization/ddp_wrap/",
                              lambda g: DDP(model, process_group=g))
    c.data = dict(tried.data, ranks=tried.by_kind)
    if not tried.by_kind["raised"] and not tried.by_kind["waited"]:
        subject.model.to(ctx.device)
        return  # DDP accepted it (a dtype differs, say): the wrap below is the check
    rank, line = tried.first_raised()
    words = ["%s's parameters differ across ranks" % subject.label]
    if rank is not None:
        raised = tried.by_kind["raised"]
        words.append("DDP(model) raised on %s: %s" % (
            "all %d ranks" % ctx.world_size if len(raised) == ctx.world_size
            else "rank(s) %s of %d" % (leaving.ranks_text(raised), ctx.world_size),
            line[:160]))
    if tried.by_kind["waited"]:
        words.append("rank(s) %s blocked in DDP's setup until the rank that raised left (a "
                     "rank that exits on the error releases them; one that catches it and "
                     "lives on leaves them waiting)" % leaving.ranks_text(tried.by_kind["waited"]))
    if tried.by_kind["went_on"]:
        words.append("rank(s) %s went on with no error" % leaving.ranks_text(
            tried.by_kind["went_on"]))
    c.fail("; ".join(words),
           advice="every rank must build the same model: its parameter shapes must not "
                  "depend on the rank (DDP compares them at construction); build "
                  "rank-specific parts after wrapping, or outside the DDP module")


def _ddp_copies(ctx, subject, torch):
    """deepcopy(DDP), deepcopy(ddp.module) (the EMA pattern), the fresh-model fix, and
    pickle(DDP): each compared with the original, tensor by tensor."""
    import copy
    import pickle

    ddp, label = subject.ddp, subject.label
    with ctx.check("deepcopy_ddp") as c:
        if subject.skip:
            c.skip(subject.skip)
        c.advice = _DDP_COPY_ADVICE
        try:
            clone = copy.deepcopy(ddp)
        except Exception as exc:
            name_blockers(c, ddp.module, label, exc)
            raise
        verify_copy(c, clone.module, ddp.module, torch, runner=clone)
        c.detail = "%s: %s" % (label, c.detail)

    with ctx.check("deepcopy_ddp_module") as c:
        if subject.skip:
            c.skip(subject.skip)
        c.advice = _COPY_ADVICE
        try:
            subject.ema = copy.deepcopy(ddp.module)
        except Exception as exc:
            name_blockers(c, ddp.module, label, exc)
            raise
        verify_copy(c, subject.ema, ddp.module, torch)
        c.detail = "%s: %s" % (label, c.detail)

    with ctx.check("fresh_load_state_dict") as c:
        if subject.skip:
            c.skip(subject.skip)
        _fresh_load_state_dict(ctx, c, subject, torch)

    with ctx.check("pickle_ddp") as c:
        if subject.skip:
            c.skip(subject.skip)
        c.advice = ("pickle or save the weights, not the DDP wrapper: "
                    "torch.save(ddp.module.state_dict(), path)")
        try:
            loaded = pickle.loads(pickle.dumps(ddp))
        except Exception as exc:
            name_blockers(c, ddp.module, label, exc)
            raise
        verify_copy(c, loaded.module, ddp.module, torch)
        c.detail = "%s: %s" % (label, c.detail)


def _fresh_load_state_dict(ctx, c, subject, torch):
    """The fix for the EMA pattern: a fresh model plus load_state_dict, equal everywhere."""
    c.advice = ("building a fresh copy and loading the weights failed: fix this before "
                "relying on it for an EMA model")
    ddp = subject.ddp
    # A rank-dependent seed makes fresh copies differ until the weights are loaded.
    fresh, error = None, None
    try:
        fresh = subject.build_fresh(1000 + ctx.rank)
        fresh.load_state_dict(ddp.module.state_dict())
    except BaseException as exc:  # the user's code may raise anything: the gather must run
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        error = exc
    # Collective outside the failure path, so one failing rank cannot hang the others.
    digests = _gather_digest(ctx, fresh if error is None else None, torch)
    if error is not None:
        raise error
    verify_copy(c, fresh, ddp.module, torch)
    if subject.ema is not None:
        verify_copy(c, fresh, subject.ema, torch)
        versus = "equals original and deepcopy"
    else:
        versus = "equals original (where deepcopy failed)"
    missing = [r for r, d in enumerate(digests) if d != d]
    if missing:
        c.fail("rank(s) %s could not build the fresh copy" % ", ".join(map(str, missing)))
    if len(set(digests)) != 1:
        c.fail("the fresh copies differ between ranks: %s" % digests,
               advice=MISMATCH_ADVICE)
    c.detail = "%s: %s on all %d ranks" % (subject.label, versus, ctx.world_size)


def _save_module_with_group(ctx, group, torch):
    import os

    from ..worker import toy

    with ctx.check("save_module_with_group") as c:
        c.advice = _SAVE_ADVICE
        torch.manual_seed(0)
        holder = toy.GroupHoldingNet(group).to(ctx.device)
        with ctx.private_tmpdir() as tmp:
            path = os.path.join(tmp, "module.pt")
            torch.save(holder, path)
            loaded = torch.load(path, weights_only=False)
        verify_copy(c, loaded, holder, torch)
        c.detail = "module with .group: " + c.detail


def _wrap_ddp(ctx, model, torch):
    from torch.nn.parallel import DistributedDataParallel

    if ctx.device.type == "cuda":
        return DistributedDataParallel(model, device_ids=[ctx.device.index])
    return DistributedDataParallel(model)


def _disagree(ctx, ok, all_gather_ints, reason):
    """A skip reason unless every rank is ``ok``: a collective (DDP) with a rank missing would hang."""
    flags = [f[0] for f in all_gather_ints(ctx, [1 if ok else 0])]
    bad = [r for r, f in enumerate(flags) if not f]
    if not bad:
        return None
    return "%s on rank(s) %s" % (reason, ", ".join(map(str, bad)))


def _gather_digest(ctx, model, torch):
    """Each rank's sum of its model's weights (NaN where it has none), via all_gather."""
    import torch.distributed as dist

    value = float("nan")
    if model is not None:
        value = sum(float(t.detach().double().sum()) for t in model.state_dict().values()
                    if t.is_floating_point())
    buf = torch.tensor([value], dtype=torch.float64, device=ctx.device)
    out = [torch.zeros_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(out, buf)
    return [round(float(t.item()), 9) for t in out]
