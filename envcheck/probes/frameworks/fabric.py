"""Lightning Fabric's checks: the model through ``fabric.setup`` in envcheck's ranks, and,
where asked for (``--framework lightning``), a deepcopy under Fabric's own launcher
(``own_launcher.py``)."""

import copy
import os

from . import own_launcher
from .presence import gate

_FABRIC_COPY_ADVICE = (
    "do not deepcopy the model fabric.setup returned: deepcopy the plain module "
    "(ema = copy.deepcopy(model.module), or copy before fabric.setup), or build the EMA "
    "model fresh and load the weights (ema.load_state_dict(model.state_dict()))")

NAME = "Lightning"


def _fabric(ctx):
    """A Fabric on the ranks envcheck started: its DDP strategy finds the process group
    already initialized and uses it (as under torchrun)."""
    from lightning.fabric import Fabric

    nodes = max(1, ctx.world_size // max(1, ctx.local_world_size))
    fabric = Fabric(accelerator="cuda" if ctx.device.type == "cuda" else "cpu",
                    devices=ctx.local_world_size, num_nodes=nodes, strategy="ddp")
    fabric.launch()
    return fabric


def checks(ctx, model, shared, present, torch):
    from ..shared.copies import name_blockers, verify_copy

    installed, version, asked = present
    state = {}
    with ctx.check("lightning_setup") as c:
        gate(c, model, present, NAME, "lightning", "fabric.setup(model)")
        fabric = _fabric(ctx)
        torch.manual_seed(0)
        state["fabric"] = fabric
        state["model"] = fabric.setup(model.build())
        c.detail = "Lightning %s: fabric.setup(%s) gave %s over %s" % (
            version, model.label, type(state["model"]).__name__,
            type(fabric.strategy).__name__)
    ready = "fabric.setup did not run (see frameworks.lightning_setup)"

    with ctx.check("lightning_deepcopy") as c:
        if "model" not in state:
            c.skip(ready if installed else "Lightning is not installed")
        c.advice = _advice()
        try:
            clone = copy.deepcopy(state["model"])
        except Exception as exc:  # the attributes that stopped it (settled as one fact)
            name_blockers(c, state["model"].module, model.label, exc)
            raise
        verify_copy(c, clone.module, state["model"].module, torch, runner=clone)
        c.detail = ("under envcheck's ranks (as under torchrun or srun): deepcopy of the "
                    "model fabric.setup returned: %s" % c.detail)

    with ctx.check("lightning_save_load") as c:
        if "model" not in state:
            c.skip(ready if installed else "Lightning is not installed")
        if shared.skip:
            c.skip(shared.skip)
        c.advice = ("fabric.save / fabric.load does not give back the model's weights: do "
                    "not resume from it")
        fabric, wrapped = state["fabric"], state["model"]
        path = os.path.join(shared.path, "fabric.ckpt")
        fabric.save(path, {"model": wrapped})
        fabric.barrier()
        fresh = fabric.setup(model.build())
        with torch.no_grad():
            for p in fresh.parameters():
                p.add_(1.0)  # differs from the saved weights until the load
        fabric.load(path, {"model": fresh})
        verify_copy(c, fresh.module, wrapped.module, torch)
        c.detail = "fabric.save on rank 0, fabric.load on every rank: %s" % c.detail

    with ctx.check("lightning_own_launcher") as c:
        if not installed:
            c.skip("Lightning is not installed")
        if not asked:
            # A training job of its own: seconds to a minute, most of it two more
            # interpreters importing torch and Lightning; every run would pay it.
            c.skip(own_launcher.NOT_ASKED)
        c.advice = _advice()
        _own_launcher(ctx, c)


def _advice():
    return _FABRIC_COPY_ADVICE


def _own_launcher(ctx, c):
    """Rank 0 runs the job; every rank reports its verdict, the same words."""
    import json

    from ...worker.gather import broadcast_text

    found = ""
    if ctx.rank == 0:
        with ctx.private_tmpdir(prefix="envcheck-fabric-") as tmp:
            job = own_launcher.run_job(tmp, max(10.0, float(ctx.timeout or 60) - 10.0))
        failed, words = own_launcher.verdict(job)
        found = json.dumps({"failed": failed, "words": words,
                            "ranks": {str(k): v for k, v in job["ranks"].items()},
                            "exit": job["exit"]})
    result = json.loads(broadcast_text(ctx, found))
    c.data = {"ranks": result["ranks"], "exit": result["exit"]}
    if result["failed"] and not all("setup" in steps for steps in result["ranks"].values()):
        # The job died before the copy was tried (on an H200 node: Lightning's MPI
        # detection imports mpi4py, whose MPI_Init aborted): the copy's advice is not
        # the fix; the failure's own text is read for one (explain.diagnose).
        c.advice = None
    if result["failed"]:
        c.fail(result["words"])
    c.detail = result["words"]
