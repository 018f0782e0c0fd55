"""frameworks: the model the way Lightning Fabric, Accelerate and DeepSpeed wrap and launch it.

The serialization and checkpoint probes test bare DDP. A framework adds its own layer:
``fabric.setup`` returns a ``_FabricModule`` that reaches the strategy and its launcher,
``accelerator.prepare`` a DDP model and its own save/load. What holds for bare DDP can
fail there. The real case: under Fabric's own launcher (``python train.py``, rank 0
starts the other ranks), ``copy.deepcopy`` of the Fabric-wrapped model fails on rank 0
only ("cannot pickle '_thread.lock' object") and rank 1 then dies with "Connection
closed by peer", while envcheck's bare-DDP check said deepcopy works
(``own_launcher.py``; observed with Lightning 2.6.6, torch 2.13.0).

A framework's checks run where its package is installed in the ranks' interpreter
(found as ``core.frameworks`` finds it, without importing it) or where the user asked
for it with ``--framework NAME`` (then a missing package is a failure, not a skip).
The job under Fabric's own launcher runs only where asked for (``--framework
lightning``): it costs more than the rest of the default suite. The
model is the user's (``--model``) or the built-in toy. Ranks whose models differ are told
before any framework wraps the model (DDP would leave a rank waiting in its setup; see
``worker/leaving.py``): the setup check fails with that reason on every rank.
"""

import os
import shutil
import tempfile

from ...worker import leaving
from . import presence


class _Model:
    """The model under test, fresh on demand; why the framework checks cannot run."""

    def __init__(self, ctx, torch):
        from ...worker import toy
        from ...worker.gather import all_gather_ints
        from ...worker.user_model import model_spec, user_model

        self.ctx, self.torch = ctx, torch
        spec = model_spec(ctx)
        self.label = spec["spec"] if spec else "toy model"
        self.build = (lambda: user_model(ctx)) if spec else (
            lambda: toy.build_toy(0, ctx.device))
        self.skip = None
        model = None
        try:
            model = self.build()
        except Exception as exc:  # serialization.model reports the user's traceback
            self.skip = "the model did not build: %s" % str(exc).splitlines()[0][:200]
        bad = [r for r, (ok,) in enumerate(all_gather_ints(ctx, [model is not None])) if not ok]
        if bad and not self.skip:
            self.skip = "the model did not build on rank(s) %s" % leaving.ranks_text(bad)
        if not bad and ctx.world_size > 1 and leaving.ranks_disagree(ctx, model):
            self.skip = ("%s's parameters differ across ranks: the framework's DDP would "
                         "raise on some ranks and leave the others waiting in its setup "
                         "(see serialization.ddp_wrap)" % self.label)


class _SharedDir:
    """A directory rank 0 makes and every rank sees (frameworks save on rank 0 and load
    everywhere), or the reason there is none; removed by rank 0 at the end."""

    def __init__(self, ctx):
        import torch.distributed as dist

        from ...worker.gather import all_gather_ints, broadcast_text

        self.ctx = ctx
        made = tempfile.mkdtemp(prefix="envcheck-frameworks-") if ctx.rank == 0 else ""
        self.path = broadcast_text(ctx, made)
        seen = all_gather_ints(ctx, [1 if os.path.isdir(self.path) else 0])
        blind = [r for r, (ok,) in enumerate(seen) if not ok]
        self.skip = ("rank 0's directory %s is not visible on rank(s) %s (another host): "
                     "the framework saves on rank 0 and loads on every rank, so it needs a "
                     "directory all ranks share" % (self.path, leaving.ranks_text(blind))
                     if blind else None)
        self._dist = dist

    def close(self):
        self._dist.barrier()
        if self.ctx.rank == 0:
            shutil.rmtree(self.path, ignore_errors=True)


def probe_frameworks(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch

    model = _Model(ctx, torch)
    shared = _SharedDir(ctx)
    try:
        from . import fabric, hf_accelerate

        fabric.checks(ctx, model, shared, presence.present(ctx, "lightning"), torch)
        hf_accelerate.checks(ctx, model, shared, presence.present(ctx, "accelerate"), torch)
    finally:
        shared.close()
    installed, version, asked = presence.present(ctx, "deepspeed")
    with ctx.check("deepspeed_initialize") as c:
        if not installed:
            presence.absent(c, "DeepSpeed", "deepspeed", asked)
        # Not run, by design: on CPU deepspeed.initialize needs DeepSpeed's CPU
        # accelerator (DS_ACCELERATOR=cpu, built with oneCCL), which a pip install of
        # deepspeed does not bring; on GPUs envcheck has not been checked against it yet.
        c.skip("DeepSpeed %s is installed, but envcheck does not run deepspeed.initialize: "
               "on CPU its engine needs DeepSpeed's CPU accelerator (DS_ACCELERATOR=cpu, "
               "oneCCL), and on GPUs this check is not written yet" % version)
