"""Hugging Face Accelerate's checks: the model through ``accelerator.prepare`` in envcheck's
ranks, its deepcopy, and ``accelerator.save_state`` / ``load_state``.

(Named hf_accelerate: a module named accelerate would shadow the package it imports.)
"""

import copy

from .presence import gate

NAME = "Accelerate"


def checks(ctx, model, shared, present, torch):
    from ..shared.copies import name_blockers, verify_copy

    installed, version, _ = present
    state = {}
    with ctx.check("accelerate_prepare") as c:
        gate(c, model, present, NAME, "accelerate", "accelerator.prepare(model)")
        from accelerate import Accelerator

        # It finds the process group envcheck initialized (as under torchrun).
        accelerator = Accelerator(cpu=ctx.device.type != "cuda")
        torch.manual_seed(0)
        state["accelerator"] = accelerator
        state["model"] = accelerator.prepare(model.build())
        c.detail = "Accelerate %s: accelerator.prepare(%s) gave %s (%s, %d processes)" % (
            version, model.label, type(state["model"]).__name__,
            accelerator.distributed_type, accelerator.num_processes)
    ready = "accelerator.prepare did not run (see frameworks.accelerate_prepare)"

    with ctx.check("accelerate_deepcopy") as c:
        if "model" not in state:
            c.skip(ready if installed else "Accelerate is not installed")
        c.advice = ("do not deepcopy the prepared model: ema = "
                    "copy.deepcopy(accelerator.unwrap_model(model)), or build it fresh and "
                    "load accelerator.unwrap_model(model).state_dict()")
        prepared = state["model"]
        inner = state["accelerator"].unwrap_model(prepared)
        try:
            clone = copy.deepcopy(prepared)
        except Exception as exc:  # the attributes that stopped it (settled as one fact)
            name_blockers(c, inner, model.label, exc)
            raise
        verify_copy(c, state["accelerator"].unwrap_model(clone), inner, torch, runner=clone)
        c.detail = "deepcopy of the model accelerator.prepare returned: %s" % c.detail

    with ctx.check("accelerate_save_load") as c:
        if "model" not in state:
            c.skip(ready if installed else "Accelerate is not installed")
        if shared.skip:
            c.skip(shared.skip)
        shared_gpu = _shared_gpu(ctx, torch)
        if shared_gpu:
            c.skip(shared_gpu)
        c.advice = ("accelerator.save_state / load_state does not give back the model's "
                    "weights: do not resume from it")
        accelerator, prepared = state["accelerator"], state["model"]
        inner = accelerator.unwrap_model(prepared)
        saved = {k: v.detach().clone() for k, v in inner.state_dict().items()}
        accelerator.save_state(shared.path)
        accelerator.wait_for_everyone()
        with torch.no_grad():
            for p in inner.parameters():
                p.add_(1.0)  # differs from the saved weights until the load
        accelerator.load_state(shared.path)
        after = inner.state_dict()
        differ = [k for k in saved if not torch.equal(saved[k].cpu(), after[k].cpu())]
        if differ:
            c.fail("%d of %d tensors differ after load_state: %s"
                   % (len(differ), len(saved), ", ".join(differ[:5])))
        c.detail = ("accelerator.save_state on rank 0, load_state on every rank: %d tensors "
                    "bit-exact" % len(saved))


def _shared_gpu(ctx, torch):
    """Why save_state / load_state cannot run in this layout, or None. Accelerate's
    wait_for_everyone passes device_ids=[LOCAL_RANK] to barrier on CPU too (MULTI_CPU),
    and a CUDA build then sets that GPU: with more ranks on the host than GPUs, a rank
    without one fails with "invalid device ordinal" and the ranks' collectives fall out
    of step (seen on an H200, torch 2.11, Accelerate 1.15, two gloo ranks). The same on
    every rank of a host, so that all skip together."""
    if ctx.device.type == "cuda" or not torch.cuda.is_available():
        return None
    gpus = torch.cuda.device_count()
    if ctx.local_world_size <= gpus:
        return None
    return ("not run: %d ranks on this host and %d GPU%s: Accelerate's wait_for_everyone "
            "calls barrier(device_ids=[LOCAL_RANK]) on CPU too, and a rank without a GPU "
            "fails there (invalid device ordinal); check Accelerate with --nproc %d, or "
            "with the GPUs hidden (CUDA_VISIBLE_DEVICES=) for a CPU run"
            % (ctx.local_world_size, gpus, "" if gpus == 1 else "s", gpus))
