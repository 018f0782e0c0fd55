"""The EMA copy of an FSDP2 model: what fails, and the two forms that work.

Training scripts keep an EMA model with ``ema = deepcopy(model)`` or, as envcheck's own
serialization advice says for DDP, ``ema = build_model();
ema.load_state_dict(model.state_dict())``. Under FSDP2 neither works: deepcopy raises
("FSDP does not support deepcopy"), and the sharded model's state_dict holds DTensors,
which an unsharded copy refuses ("mixed torch.Tensor and DTensor"). What works, run
here for real: whole tensors from ``get_model_state_dict(model,
options=StateDictOptions(full_state_dict=True))`` into an unsharded copy, or an EMA model
sharded with the same units loading the sharded state dict (no model held whole).
"""

import copy

ADVICE = (
    "do not deepcopy an FSDP2 model, and do not load its state_dict() into an unsharded "
    "copy (its values are DTensors): build the EMA model fresh and load whole tensors, "
    "ema = build_model(); ema.load_state_dict(get_model_state_dict(model, "
    "options=StateDictOptions(full_state_dict=True))) (from "
    "torch.distributed.checkpoint.state_dict; every rank calls it: it all-gathers), or, "
    "for a model too large to hold whole on every rank, shard the EMA model with the same "
    "units and load the sharded state: ema.load_state_dict(model.state_dict()) (both "
    "verified by fsdp.ema_copy); the usual per-step update, ema_p.lerp_(p, 1 - decay), "
    "works only on the EMA sharded alike: an unsharded EMA cannot lerp_ toward the "
    "model's DTensor parameters (mixed torch.Tensor and DTensor; fsdp.ema_copy tries both)")


def deepcopy(ctx, c, run, skip):
    if skip:
        c.skip(skip)
    model = run.trained[0]
    c.advice = ADVICE
    try:
        copy.deepcopy(model)
    except Exception as exc:
        c.fail("copy.deepcopy of the FSDP2-sharded model raised %s: %s"
               % (type(exc).__name__, _line(exc)))
    c.detail = "copy.deepcopy of the FSDP2-sharded model worked (%s)" % run.subject.label


def ema_copy(ctx, c, run, skip):
    if skip:
        c.skip(skip)
    import torch

    from . import steps as fs
    from ..shared.files import diff_state

    model, _, mesh = run.trained
    c.advice = ("an EMA copy of the FSDP2 model does not hold the model's weights here: "
                "check the copy against the model before training with it")
    # Collectives first, on every rank whatever happens after (they all-gather).
    whole = run.fsdp.full_model_state(model)
    want = {n: t.detach().cpu() for n, t in fs.params(model).items()}
    sharded = {n: _local(t).detach().cpu() for n, t in model.state_dict().items()}

    plain = run.subject.build(4)
    try:
        plain.load_state_dict(model.state_dict())
        plain_result = "worked"
    except Exception as exc:
        plain_result = "%s: %s" % (type(exc).__name__, _dtensor_line(exc))
    c.data["unsharded_load_state_dict"] = plain_result

    ema = run.subject.build(5)
    ema.load_state_dict(whole)
    got = {n: t.detach().cpu() for n, t in ema.named_parameters()}
    differ = diff_state(want, got, torch)
    if differ:
        c.fail("rank %d: the EMA model loaded from get_model_state_dict(full_state_dict="
               "True) differs from the model: %s" % (ctx.rank, ", ".join(differ[:4])))

    alike = run.subject.build(6)
    fs.shard(run.fsdp, alike, mesh)
    alike.load_state_dict(model.state_dict())
    mine = {n: _local(t).detach().cpu() for n, t in alike.state_dict().items()}
    differ = diff_state(sharded, mine, torch)
    if differ:
        c.fail("rank %d: the EMA model sharded alike differs from the model after "
               "load_state_dict(model.state_dict()): %s" % (ctx.rank, ", ".join(differ[:4])))
    # The per-step EMA update, on both forms: each parameter pulled toward the model's.
    c.data["lerp_unsharded"] = _lerp(ema, model, torch)
    c.data["lerp_sharded_alike"] = _lerp(alike, model, torch)
    c.data.update(full_state_dict=len(want), sharded_alike=len(sharded))
    c.detail = ("the EMA forms that work under FSDP2, bit-exact on every rank: a fresh "
                "unsharded model + load_state_dict(get_model_state_dict(model, options="
                "StateDictOptions(full_state_dict=True))) (%d parameters), and a fresh model "
                "sharded alike + load_state_dict(model.state_dict()) (%d local shards); a "
                "fresh unsharded model + load_state_dict(model.state_dict()): %s; the "
                "per-step ema_p.lerp_(p, 0.1): unsharded %s, sharded alike %s; %s"
                % (len(want), len(sharded), plain_result, c.data["lerp_unsharded"],
                   c.data["lerp_sharded_alike"], run.subject.label))


def _lerp(ema, model, torch):
    """'works' or 'ErrorType: cause': ``ema_p.lerp_(p, 0.1)`` for every parameter, the
    EMA update a training loop runs after each optimizer step."""
    try:
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 0.1)
    except Exception as exc:
        return "%s: %s" % (type(exc).__name__, _line(exc)[:160])
    return "works"


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def _dtensor_line(exc):
    """load_state_dict's first line only says 'Error(s) in loading state_dict for X:';
    the cause (a Tensor mixed with a DTensor) is at the end of a long line further down."""
    text = " ".join(str(exc).split())
    cause = text.find("exception occurred : (")
    if cause >= 0:
        return text[cause + len("exception occurred : ("):].split("',)")[0].strip("'")[:200]
    return text[:200] or type(exc).__name__


def _line(exc):
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
