"""fsdp: does FSDP2 train and checkpoint here the way TorchTitan-shaped training needs?

Large-model training shards parameters with FSDP2 (``fully_shard``: DTensors on a
DeviceMesh, optimizer state sharded alike), takes its state dict with
``torch.distributed.checkpoint.state_dict.get_state_dict``, saves it with DCP, and the
next job often restarts on another number of GPUs. This probe, on the ranks' devices:

- shards a small multi-layer model (or ``--model``) and takes one AdamW step, compared
  with the same step of the unsharded model given every rank's batch (``train_step``);
- saves model + optimizer with get_state_dict + DCP and loads them into a freshly built,
  freshly sharded model with set_state_dict: bit-exact on every rank (``save_load``);
- saves and loads with ``process_group=`` a strict subset of the ranks, and reports what
  DCP does with the ranks outside it (``subgroup``);
- with 4 or more ranks, the same round trip on a 2-D (replicate x shard) mesh: HSDP;
- on GPUs, the CPU-offload variant (``CPUOffloadPolicy``);
- after the run, ``envcheck run`` starts ranks at other world sizes (``FOLLOW_UPS``):
  the checkpoint saved by N ranks is loaded by N+1 ranks and by 1 rank, each with its own
  sharding, and the full tensors must agree bit for bit (``reshard_grow``,
  ``reshard_shrink``).

FSDP2 lives in ``torch.distributed._composable.fsdp`` before 2.6 and in
``torch.distributed.fsdp`` from 2.6 (``api``); where a piece is missing the checks
are skipped and say which.
"""

import json
import os

from ..shared.dcp import DcpFailed

_ROUND_TRIP_ADVICE = (
    "this checkpoint does not resume the training state it saved: do not trust resumes "
    "here; check the filesystem the checkpoint lives on (every rank must see the same "
    "files) and compare with another torch release")


def probe_fsdp(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    run_checks(ctx)


def run_checks(ctx, dcp_class=None):
    """The probe's checks, in order. ``dcp_class``: the DCP adapter to save and load
    with (``shared/dcp.py``'s ``Dcp`` by default). The fault tests hand in one that
    damages what was saved, from a test probe (tests/data/probes/fsdp_faults.py)."""
    import torch

    from ..shared import agree
    from ..shared.files import shared_dir
    from ..shared.dcp import Dcp, DcpMissing
    from .fsdp2 import Fsdp, FsdpMissing

    import torch.distributed as dist

    subject = _Subject(ctx, torch)
    missing = subject.skip
    fsdp = dcp = None
    try:
        fsdp, dcp = Fsdp(torch), (dcp_class or Dcp)(torch)
    except (FsdpMissing, DcpMissing) as exc:
        missing = missing or str(exc)
    with shared_dir(ctx) as (shared, problem):
        # A directory DCP cannot use leaves the train step to test; the rest is DCP.
        unshared = problem if problem and problem.unshared and not missing else None
        gate = (None, []) if missing else agree.object_collectives(ctx, dist)
        if not missing and gate[1]:
            missing = ("DCP cannot exchange its plans here: dist.all_gather_object fails on "
                       "rank(s) %s (%s) (see checkpoint.dcp_save_load)"
                       % (",".join(map(str, gate[1])), _first_line(gate[0])))
        run = _Run(ctx, torch, subject, fsdp, dcp, shared)
        with ctx.check("train_step") as c:
            run.train_step(c, missing)
        trained = agree.agreed(ctx, run.trained)
        if trained is None and not missing:
            # On every rank alike (it builds a mesh: collectives).
            run.fallback()
            trained = agree.agreed(ctx, run.trained)
        after = missing or (None if trained else
                            "FSDP2 did not take a step here: see fsdp.train_step")
        from . import divide, ema

        with ctx.check("deepcopy") as c:
            ema.deepcopy(ctx, c, run, after)
        with ctx.check("ema_copy") as c:
            ema.ema_copy(ctx, c, run, after)
        with ctx.check("gradient_divide") as c:
            divide.gradient_divide(ctx, c, run, after)
        with ctx.check("save_load") as c:
            if unshared and unshared.fail and not after:
                c.fail(unshared.message, advice=unshared.advice)
            run.save_load(c, after or (problem.message if problem else None))
        if problem and not after:
            after = ("DCP's directory is not shared between the hosts: see fsdp.save_load"
                     if unshared else problem.message)
        with ctx.check("subgroup") as c:
            run.subgroup(c, after)
        with ctx.check("hsdp") as c:
            run.hsdp(c, after)
        with ctx.check("cpu_offload") as c:
            run.cpu_offload(c, after)


def resume_elsewhere(ctx):
    """A follow-up phase: the main run's checkpoint loaded at this phase's world size."""
    import torch

    with ctx.check(ctx.phase["check"]) as c:
        _resume(ctx, c, torch)
    # The rest of what TorchTitan saves (lr scheduler, per-rank dataloader state), at the
    # same world size, so that "reshard passed" does not stand for the whole restart.
    with ctx.check(ctx.phase["check"].replace("reshard_", "train_state_")) as c:
        _resume_train_state(ctx, c, torch)


def _resume_train_state(ctx, c, torch):
    from . import train_state
    from ..shared.dcp import Dcp, DcpMissing

    meta_path = os.path.join(ctx.handoff, "meta.json")
    if not os.path.exists(meta_path):
        c.skip("the %d-rank run saved no checkpoint to load (see fsdp.save_load)"
               % ctx.phase["saved_world_size"])
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    try:
        dcp = Dcp(torch)
    except DcpMissing as exc:
        c.skip(str(exc))
    train_state.resume(ctx, c, dcp, meta, torch)


class _Subject:
    """The model: the built-in LayeredNet, or the user's (--model)."""

    def __init__(self, ctx, torch):
        from ...worker.gather import all_gather_strings
        from ...worker.user_model import describe_model, model_spec, user_model

        self.ctx, self.torch = ctx, torch
        self.spec = model_spec(ctx)
        self.skip = None
        if not self.spec:
            self.label = "LayeredNet (3 blocks + head)"
            return
        self.label = self.spec["spec"]
        self._user_model = user_model
        if ctx.phase:  # a follow-up: the main run reported the model check
            return
        model = None
        with ctx.check("model") as c:
            c.advice = ("make %s import and return a torch.nn.Module in every rank, called "
                        "with no arguments or with rank=/device= (see the traceback)"
                        % self.spec["spec"])
            built = None
            try:
                model = user_model(ctx)
            except Exception as exc:  # raised after the gather: the others wait in it
                built = exc
            # Every rank, built or not, before any collective of the model's own: a
            # rank whose model differs (or did not build) must not leave the others
            # waiting in FSDP's all-gathers, nor abort gloo with mismatched sizes.
            layouts = all_gather_strings(ctx, "" if model is None else _layout(model))
            if built is not None:
                raise built
            if len(set(layouts)) > 1 and all(layouts):
                c.fail(_layout_difference(ctx, model, layouts), advice=(
                    "build the same model in every rank: its parameters' names and shapes "
                    "must not depend on the rank (FSDP2 shards each parameter across the "
                    "ranks and all-gathers it back, so every rank must hold the same "
                    "shapes; nothing in torch checks it: on gloo the first all-gather "
                    "aborts a rank with SIGABRT and the others see 'Connection reset by "
                    "peer')"))
            c.detail = "%s: %s on %s" % (self.label, describe_model(model), ctx.device)
        bad = [r for r, text in enumerate(layouts) if not text]
        if bad:
            self.skip = ("the model did not build on rank(s) %s (see fsdp.model)"
                         % ",".join(map(str, bad)))
        elif len(set(layouts)) > 1:
            self.skip = "the model's parameters differ between ranks (see fsdp.model)"

    def build(self, seed):
        """A new model on the rank's device, the same on every rank."""
        torch = self.torch
        if not self.spec:
            from ...worker import toy

            torch.manual_seed(seed)
            return toy.LayeredNet().to(self.ctx.device)
        from ..shared.agree import sync_replicas

        model = self._user_model(self.ctx)
        # FSDP2 takes each rank's shard from that rank's own copy: copies that differ
        # would be stitched into a model nobody built. Rank 0's weights, as DDP does.
        sync_replicas(self.ctx, model, torch)
        return model


class _Run:
    def __init__(self, ctx, torch, subject, fsdp, dcp, shared):
        self.ctx, self.torch, self.subject = ctx, torch, subject
        self.fsdp, self.dcp, self.shared = fsdp, dcp, shared
        self.trained = None  # (model, optimizer, mesh) after train_step
        self.no_forward = None  # why the sharded model takes no real step here

    # -- shared pieces ------------------------------------------------------------------

    def _pair(self, mesh, offload=False):
        """(reference, sharded model, how): the same weights, one of them sharded."""
        from . import steps

        ref = self.subject.build(0)
        model = self.subject.build(1)
        model.load_state_dict(ref.state_dict())
        how = steps.shard(self.fsdp, model, mesh, offload)
        return ref, model, how

    def _step_and_compare(self, c, mesh, offload=False):
        """Shard, step, compare with the unsharded step; returns (model, optimizer, how)."""
        from . import steps as fs

        ctx = self.ctx
        ref, model, how = self._pair(mesh, offload)
        opt, ref_opt = fs.make_optimizer(model), fs.make_optimizer(ref)
        batches = [fs.inputs_for(ref, r, ctx.device) for r in range(ctx.world_size)]
        if batches[0] is None or self.no_forward:
            self._synthetic_step(model, opt)
            c.data.update(sharded=how, compared=False,
                          not_compared=self.no_forward or "no example_inputs")
            return model, opt, how, None, None
        ref_out = fs.reference_step(ref, ref_opt, batches)
        c.data["sharded"] = how  # also when the step below fails
        try:
            _, out = fs.step(model, opt, batches[ctx.rank], ctx.rank)
        except Exception as exc:
            c.fail("fully_shard worked, but the sharded model's forward/backward on %s "
                   "(backend %s) raised %s: %s" % (ctx.device.type, ctx.backend,
                                                   type(exc).__name__, _first_line(exc)),
                   advice=fs.split_advice(ref) if self.subject.spec else None)
        forward_exact = len(out) == len(ref_out[ctx.rank]) and all(
            _same(a, b, self.torch) for a, b in zip(out, ref_out[ctx.rank]))
        bad_g, worst_g, exact_g = fs.compare(fs.grads(model), fs.grads(ref))
        bad_p, worst_p, exact_p = fs.compare(fs.params(model), fs.params(ref))
        c.data.update(sharded=how, compared=True, forward_bit_exact=forward_exact,
                      grads_bit_exact=exact_g, params_bit_exact=exact_p,
                      max_grad_difference=worst_g, max_param_difference=worst_p,
                      rtol=fs.RTOL, atol=fs.ATOL)
        # Reported by the caller once its collectives are done: a rank that failed here
        # and skipped them would leave the others waiting.
        problem = None
        if not forward_exact:
            problem = ("rank %d: the sharded model's output differs from the unsharded "
                       "model's on the same batch (FSDP2 all-gathers the exact parameters, "
                       "so it must be bit-exact)" % ctx.rank)
        elif bad_g or bad_p:
            problem = ("after one AdamW step the sharded model differs from the unsharded "
                       "step beyond rtol %g / atol %g: %s"
                       % (fs.RTOL, fs.ATOL, ", ".join(
                           (bad_g and ["grad " + b for b in bad_g[:3]]) + bad_p[:3])))
        return model, opt, how, exact_g and exact_p, problem

    def fallback(self):
        """train_step failed: a model sharded alike, stepped with gradients set by hand,
        so that the checkpoint checks still say whether get_state_dict + DCP work."""
        from . import steps as fs

        self.trained = None
        try:
            mesh = self.fsdp.mesh(self.ctx.device.type, (self.ctx.world_size,))
            model = self.subject.build(1)
            fs.shard(self.fsdp, model, mesh)
            opt = fs.make_optimizer(model)
            self._synthetic_step(model, opt)
        except Exception:
            return
        self.trained = (model, opt, mesh)
        self.no_forward = "the sharded forward fails here: see fsdp.train_step"

    def _synthetic_step(self, model, opt):
        """No inputs (a --model without example_inputs): gradients set by hand, so the
        optimizer holds state to checkpoint."""
        for p in model.parameters():
            if p.requires_grad:
                p.grad = self.torch.full_like(p, 0.01)
        opt.step()

    def _round_trip(self, mesh, offload, model, opt, name):
        """Save model + optimizer (get_state_dict + DCP), load into a fresh sharded model
        (set_state_dict); returns (entries that differ on this rank, tensors compared)."""
        from . import steps as fs
        from ..shared.files import diff_state
        from ..shared.state import clone, count_tensors, local

        torch = self.torch
        state = self.fsdp.sharded_state(model, opt)
        expected = local(clone(state, torch))
        path = self._path(name)
        _dcp(self.dcp.save, state, path)
        fresh = self.subject.build(2)
        fs.shard(self.fsdp, fresh, mesh, offload)
        fresh_opt = fs.make_optimizer(fresh)
        target = self.fsdp.sharded_state(fresh, fresh_opt)
        _dcp(self.dcp.load, target, path)
        self.fsdp.load_state(fresh, fresh_opt, target)
        got = local(self.fsdp.sharded_state(fresh, fresh_opt))
        return diff_state(expected, got, torch), count_tensors(expected, torch), path

    def _path(self, name):
        # The save_load round trip's checkpoint is named "ckpt" or "fsdp", the subgroup's
        # "subgroup": the fault tests' DCP adapter finds them by these names.
        if name == "fsdp" and self.ctx.handoff:
            # The checkpoint the follow-up phases load: in the run's hand-off directory.
            return os.path.join(self.ctx.handoff, "ckpt")
        return os.path.join(self.shared, name)

    # -- the checks ---------------------------------------------------------------------

    def train_step(self, c, skip):
        if skip:
            c.skip(skip)
        ctx = self.ctx
        c.data["api"] = self.fsdp.api
        mesh = self.fsdp.mesh(ctx.device.type, (ctx.world_size,))
        model, opt, how, exact, problem = self._step_and_compare(c, mesh)
        self.trained = (model, opt, mesh)
        if problem:
            c.fail(problem, advice=_STEP_ADVICE)
        if exact is None:
            c.detail = ("not compared: one AdamW step with gradients set by hand (give the "
                        "model example_inputs to compare with the unsharded step); "
                        "fully_shard over a 1-D mesh of %d ranks, %s, %s"
                        % (ctx.world_size, self.subject.label, how))
            return
        c.detail = ("one AdamW step sharded over %d ranks equals the unsharded step on "
                    "every rank's batch: output bit-exact, gradients and weights %s; "
                    "%s, %s" % (
                        ctx.world_size,
                        "bit-exact" if exact else "within rtol %g (max difference %.2g)"
                        % (c.data["rtol"], max(c.data["max_grad_difference"],
                                               c.data["max_param_difference"])),
                        self.subject.label, how))

    def save_load(self, c, skip):
        if skip:
            c.skip(skip)
        ctx = self.ctx
        c.advice = _ROUND_TRIP_ADVICE
        model, opt, mesh = self.trained
        differ, n, path = self._round_trip(mesh, False, model, opt, "fsdp")
        if ctx.handoff:
            # Collectives: every rank, whatever its own comparison found.
            self._hand_off(model, opt, path)
        if differ:
            c.fail("%d of %d entries differ after the DCP round trip on rank %d: %s"
                   % (len(differ), n, ctx.rank, ", ".join(differ[:4])))
        c.detail = ("%d entries bit-exact on every rank: model + AdamW state from "
                    "get_state_dict, saved by %d ranks with DCP, loaded into a fresh "
                    "sharded model with set_state_dict; %s" % (n, ctx.world_size,
                                                             self.subject.label))
        if self.no_forward:
            c.detail += (" (after a step with gradients set by hand: %s)" % self.no_forward)
        c.data = {"entries": n, "files": sorted(os.listdir(path)), "api": self.dcp.api}

    def _hand_off(self, model, opt, path):
        """What the follow-up phases load: the checkpoint (already in the hand-off
        directory), the full tensors it must give, and a note that it is complete."""
        import torch.distributed as dist

        from ..shared.state import cpu

        torch = self.torch
        from . import train_state

        full = cpu(self.fsdp.full_state(model, opt))  # a collective: every rank
        if self.ctx.rank == 0:
            torch.save(full, os.path.join(self.ctx.handoff, "expected.pt"))
        try:  # collectives (DCP): every rank; a failure here is every rank's
            extra = train_state.save(self.ctx, self.dcp, self.ctx.handoff, torch)
        except DcpFailed:
            extra = None
        dist.barrier()
        if self.ctx.rank == 0:
            meta = {"saved_world_size": self.ctx.world_size, "label": self.subject.label,
                    "api": self.fsdp.api, "train_state": extra}
            tmp = os.path.join(self.ctx.handoff, "meta.json.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(meta, f)
            os.replace(tmp, os.path.join(self.ctx.handoff, "meta.json"))

    def subgroup(self, c, skip):
        if skip:
            c.skip(skip)
        import torch.distributed as dist

        from ..shared.files import diff_state
        from ..shared.state import clone, count_tensors, per_rank, zeros
        from ...worker.gather import all_gather_strings

        ctx, torch = self.ctx, self.torch
        if ctx.world_size < 2:
            c.skip("needs 2 or more ranks: a strict subset of 1 rank is empty")
        members = list(range(ctx.world_size - 1))
        outside = [ctx.world_size - 1]
        group = dist.new_group(ranks=members)  # every rank calls new_group
        model, opt, _ = self.trained
        # Whole tensors on every rank (a collective of all ranks): what a subset can save
        # of a model sharded over all of them.
        state = {"model": self.fsdp.full_state(model, opt)["model"],
                 "rank%d" % ctx.rank: per_rank(torch, ctx.device, ctx.rank)}
        path = os.path.join(self.shared, "subgroup")
        c.data = {"group_ranks": members, "outside_ranks": outside}
        differ, failed = [], None
        if ctx.rank in members:
            try:
                expected = clone(state, torch)
                _dcp(self.dcp.save, state, path, group)
                target = zeros(expected, torch)
                _dcp(self.dcp.load, target, path, group)
                differ = diff_state(expected, target, torch)
            except Exception as exc:
                # Raised after the barrier and the gathers below: the rank outside the
                # group waits in them for this one (torch 2.4.1's load raises TypeError
                # in _all_gather_keys on the group's ranks only).
                failed = exc
        dist.barrier()
        errors = all_gather_strings(ctx, "" if failed is None else "%s: %s" % (
            type(failed).__name__, _first_line(failed)))
        if failed is not None:
            raise failed
        if any(errors):
            c.fail("the group's save and load failed on rank(s) %s: %s" % (
                _ranks([r for r, e in enumerate(errors) if e]),
                next(e for e in errors if e)), advice=_ROUND_TRIP_ADVICE)
        saved = sorted(k for k in _checkpoint_keys(self.dcp, path) if k.startswith("rank"))
        c.data["per_rank_entries_saved"] = saved
        outsider = ""
        if ctx.rank in outside:
            # What a rank outside the group gets when it joins the group's load.
            try:
                blank = zeros(state, torch)
                _dcp(self.dcp.load, blank, path, group)
                loaded = [k for k, v in blank["model"].items() if bool(v.ne(0).any())]
                outsider = ("returned without an error, %s" % (
                    "loading the model's tensors" if loaded else
                    "loading nothing (its tensors stayed zero)"))
            except Exception as exc:
                outsider = "%s: %s" % (type(exc).__name__, _first_line(exc))
        outsider = all_gather_strings(ctx, outsider)[outside[0]]
        c.data["outsider_load"] = outsider
        if ctx.rank in members and differ:
            c.fail("%d entries differ after a save and load with process_group=ranks %s: %s"
                   % (len(differ), members, ", ".join(differ[:4])), advice=_ROUND_TRIP_ADVICE)
        wanted = ["rank%d" % r for r in members]
        if saved != wanted:
            c.fail("the checkpoint saved by process_group=ranks %s holds per-rank entries "
                   "%s, expected exactly those of the group's ranks %s"
                   % (members, saved, wanted))
        c.detail = ("process_group=ranks %s of %d: saved and loaded by the group alone, %d "
                    "tensors bit-exact on its ranks; rank %s outside it: DCP plans, writes "
                    "and reads with the group's ranks only, so its own entries are not in "
                    "the checkpoint" % (_ranks(members), ctx.world_size,
                                        count_tensors(state, torch), _ranks(outside)))
        c.detail += "; dcp.load given the group on rank %s: %s" % (_ranks(outside), outsider)

    def hsdp(self, c, skip):
        if skip:
            c.skip(skip)
        ctx = self.ctx
        shape = _hsdp_shape(ctx.world_size)
        if shape is None:
            c.skip("a 2-D (replicate x shard) mesh needs 4 or more ranks that factor into "
                   "groups of 2 or more; %d rank(s) do not" % ctx.world_size)
        mesh = self.fsdp.mesh(ctx.device.type, shape, ("replicate", "shard"))
        self._variant(c, mesh, False, "hsdp", "HSDP, %d x %d (replicate x shard) mesh"
                      % shape)
        c.data["mesh"] = list(shape)

    def cpu_offload(self, c, skip):
        if skip:
            c.skip(skip)
        ctx = self.ctx
        if ctx.device.type == "cpu":
            c.skip("ranks run on CPU (backend %s): there is nothing to offload; this runs "
                   "on GPUs (NCCL)" % ctx.backend)
        if self.fsdp.CPUOffloadPolicy is None:
            c.skip("torch %s has no CPUOffloadPolicy in %s"
                   % (self.torch.__version__, self.fsdp.where))
        mesh = self.fsdp.mesh(ctx.device.type, (ctx.world_size,))
        self._variant(c, mesh, True, "offload", "fully_shard(offload_policy="
                      "CPUOffloadPolicy()) over %d ranks" % ctx.world_size)

    def _variant(self, c, mesh, offload, name, what):
        c.advice = _STEP_ADVICE
        model, opt, how, exact, problem = self._step_and_compare(c, mesh, offload)
        differ, n, _ = self._round_trip(mesh, offload, model, opt, name)
        if problem:
            c.fail(problem, advice=_STEP_ADVICE)
        if differ:
            c.fail("%d of %d entries differ after the DCP round trip on rank %d: %s"
                   % (len(differ), n, self.ctx.rank, ", ".join(differ[:4])),
                   advice=_ROUND_TRIP_ADVICE)
        step = ("not compared (%s)" % c.data["not_compared"] if exact is None else
                "equals the unsharded step (%s)" % ("bit-exact" if exact else "within rtol %g"
                                                    % c.data["rtol"]))
        c.detail = ("%s: one AdamW step %s; get_state_dict + DCP round trip into a "
                    "fresh model: %d entries bit-exact on every rank; %s, %s"
                    % (what, step, n, self.subject.label, how))


_STEP_ADVICE = ("FSDP2 does not give the numbers training without sharding gives: do not "
                "train with it on this torch/backend; compare with another torch release "
                "and report it with this check's data")


def _resume(ctx, c, torch):
    from . import steps as fs
    from ..shared.files import diff_state, quiet_load
    from ..shared.state import count_tensors, cpu
    from ..shared.dcp import Dcp, DcpMissing
    from .fsdp2 import Fsdp, FsdpMissing
    from ...worker.gather import all_gather_ints

    saved = ctx.phase["saved_world_size"]
    c.data = {"saved_world_size": saved, "loaded_world_size": ctx.world_size}
    c.advice = ("a checkpoint saved by %s does not load as saved by %s: resuming on "
                "another number of GPUs would change the model; resume at the same world "
                "size, or convert the checkpoint (dcp_to_torch_save) and check it"
                % (_n_ranks(saved), _n_ranks(ctx.world_size)))
    meta_path = os.path.join(ctx.handoff, "meta.json")
    if not os.path.exists(meta_path):
        c.skip("the %d-rank run saved no checkpoint to load (see fsdp.save_load)" % saved)
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    try:
        fsdp, dcp = Fsdp(torch), Dcp(torch)
    except (FsdpMissing, DcpMissing) as exc:
        c.skip(str(exc))
    subject = _Subject(ctx, torch)
    model = subject.build(3)
    mesh = fsdp.mesh(ctx.device.type, (ctx.world_size,))
    how = fs.shard(fsdp, model, mesh)
    opt = fs.make_optimizer(model)
    target = fsdp.sharded_state(model, opt)
    try:
        _dcp(dcp.load, target, os.path.join(ctx.handoff, "ckpt"))
    except DcpFailed as exc:
        if "Size mismatch" in str(exc):
            c.fail(str(exc), advice=(
                "the model built by %s has other shapes than the one saved by %s: a model "
                "whose shapes depend on the world size cannot resume on another number of "
                "GPUs; build it from its configuration alone (FSDP2 shards any shape, "
                "unevenly where it must)" % (_n_ranks(ctx.world_size), _n_ranks(saved))))
        raise
    fsdp.load_state(model, opt, target)
    got = cpu(fsdp.full_state(model, opt))
    expected = quiet_load(torch, os.path.join(ctx.handoff, "expected.pt"))
    rows = _shard_rows(model)
    everyone = all_gather_ints(ctx, [rows[1]])
    c.data["first_weight"] = rows[0]
    c.data["rows_per_rank"] = [r for (r,) in everyone]
    differ = diff_state(expected, got, torch)
    if differ:
        c.fail("%d of %d entries differ when the %d-rank checkpoint is loaded by %d "
               "rank(s): %s" % (len(differ), count_tensors(expected, torch), saved,
                                ctx.world_size, ", ".join(differ[:4])))
    c.detail = ("saved by %d ranks, loaded by %d (%s rows per rank: %s): %d entries "
                "(model + AdamW state) bit-exact as full tensors on every rank; %s, %s"
                % (saved, ctx.world_size, rows[0], "/".join(str(r) for (r,) in everyone),
                   count_tensors(expected, torch), meta["label"], how))


def _layout(model):
    """A digest of the model's parameter and buffer names, shapes and dtypes."""
    import hashlib

    items = [(n, tuple(t.shape), str(t.dtype)) for n, t in model.state_dict().items()
             if hasattr(t, "shape")]
    return hashlib.sha1(repr(items).encode("utf-8")).hexdigest()


def _layout_difference(ctx, model, layouts):
    """The first entry whose name or shape differs between the ranks (collectives of
    every rank, in the same order: all ranks reach this with their layouts differing)."""
    from ...worker.gather import all_gather_ints, all_gather_strings

    items = [(n, tuple(t.shape)) for n, t in model.state_dict().items()
             if hasattr(t, "shape")]
    counts = [n for (n,) in all_gather_ints(ctx, [len(items)])]
    groups = {}
    for r, text in enumerate(layouts):
        groups.setdefault(text, []).append(r)
    which = "; ".join("rank(s) %s" % _ranks(g) for g in groups.values())
    for i in range(min(counts)):
        name, shape = items[i]
        seen = all_gather_strings(ctx, "%s %s" % (name, list(shape)))
        if len(set(seen)) > 1:
            return ("the model differs between ranks (%s): %s" % (which, ", ".join(
                "rank %d has %s" % (r, text) for r, text in enumerate(seen))))
    return ("the model differs between ranks (%s): %s tensors in its state dict"
            % (which, ", ".join("rank %d has %d" % (r, n) for r, n in enumerate(counts))))


def _shard_rows(model):
    """(name, rows of this rank's shard) of the model's first weight."""
    for name, p in model.named_parameters():
        local = p.to_local() if hasattr(p, "to_local") else p
        return name, int(local.shape[0]) if local.dim() else 1
    return None, 0


def _hsdp_shape(n):
    """(replicate, shard) for n ranks: the smallest replicate factor >= 2 that leaves
    shard groups of 2 or more; None below 4 ranks or for a prime."""
    for r in range(2, n):
        if n % r == 0 and n // r >= 2:
            return r, n // r
    return None


def _checkpoint_keys(dcp, path):
    """The entries a DCP checkpoint holds, from its metadata (no collective)."""
    reader = dcp.dcp.FileSystemReader(path)
    return list(reader.read_metadata().state_dict_metadata)


def _dcp(fn, *args):
    """DCP raises CheckpointException, a BaseException (not an Exception), carrying each
    rank's error. The Dcp adapter already turns it into ``DcpFailed`` naming each rank's
    error; this covers a call that did not go through it, so that a check reports it
    like any failure (and the rank lives on)."""
    try:
        return fn(*args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        if isinstance(exc, Exception) and not hasattr(exc, "failures"):
            raise
        failures = getattr(exc, "failures", None) or {}
        for rank in sorted(failures):
            inner = failures[rank]
            inner = inner[0] if isinstance(inner, tuple) else inner
            raise DcpFailed("DCP failed on rank %d: %s: %s"
                            % (rank, type(inner).__name__, _first_line(inner))) from None
        raise DcpFailed("%s: %s" % (type(exc).__name__, _first_line(exc))) from None


def _same(a, b, torch):
    from ..shared.files import same_bits

    return same_bits(a, b, torch)


def _n_ranks(n):
    return "%d rank%s" % (n, "" if n == 1 else "s")


def _ranks(ranks):
    return ",".join(map(str, ranks))


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
