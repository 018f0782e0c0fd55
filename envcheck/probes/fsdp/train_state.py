"""TorchTitan's train state beyond model and optimizer, resumed at another world size.

TorchTitan's CheckpointManager (0.2.2, ``torchtitan/components/checkpoint.py``) saves,
next to the model and optimizer, the lr scheduler (``LRSchedulersContainer.state_dict``:
its first ``LambdaLR``'s state) and the dataloader (``ParallelAwareDataloader``,
``torchtitan/components/dataloader.py``), whose state is per data-parallel rank: a key
``dp_rank_<r>`` with the pickled ``StatefulDataLoader`` state, and ``world_size``. At
another world size the dataloader does not load: a new rank asks for a key the
checkpoint lacks (DCP: "Missing key in checkpoint state_dict: dataloader.dp_rank_2"), and
a rank that finds its key asserts "dp_degree is inconsistent before and after
checkpoint, dataloader resharding is not supported yet". TorchTitan's own way round is
``--checkpoint.exclude_from_loading dataloader``.

The main run saves both with DCP into the hand-off directory, with TorchTitan's own
``ParallelAwareDataloader`` where torchtitan is installed (the lr scheduler is torch's
``LambdaLR``, which is what TorchTitan's container saves); each follow-up phase loads
them at its own world size.
"""

import os

SUBDIR = "train_state"
STEPS = 3  # scheduler steps and batches taken before the save


class Missing(Exception):
    """torchtitan (or torchdata, which its dataloader needs) is not importable."""


def titan_dataloader_class():
    """(ParallelAwareDataloader, torchtitan version). torchtitan 0.2.2's package
    ``__init__`` imports its quantization components, which import triton (absent from
    CPU installs): where that import fails, the component module is loaded from the
    installed package without running that ``__init__``."""
    import importlib
    import importlib.metadata
    import importlib.util
    import sys
    import types

    spec = importlib.util.find_spec("torchtitan")
    if spec is None:
        raise Missing("torchtitan is not installed")
    version = importlib.metadata.version("torchtitan")
    try:
        importlib.import_module("torchtitan")
    except ImportError:
        for name in [n for n in sys.modules if n == "torchtitan" or n.startswith("torchtitan.")]:
            del sys.modules[name]
        bare = types.ModuleType("torchtitan")
        bare.__path__ = list(spec.submodule_search_locations)
        sys.modules["torchtitan"] = bare
    try:
        module = importlib.import_module("torchtitan.components.dataloader")
    except ImportError as exc:
        raise Missing("torchtitan %s's dataloader does not import: %s" % (version, exc))
    return module.ParallelAwareDataloader, version


def _dataset(torch):
    class Numbers(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(1000))
    return Numbers()


def _scheduler(torch):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / 10))


def save(ctx, dcp, handoff, torch):
    """Main run, every rank: the lr scheduler and the dataloader after STEPS steps."""
    sched = _scheduler(torch)
    for _ in range(STEPS):
        sched.optimizer.step()
        sched.step()
    state = {"lr_scheduler": sched}
    note = None
    try:
        loader_class, version = titan_dataloader_class()
        loader = loader_class(_dataset(torch), dp_rank=ctx.rank, dp_world_size=ctx.world_size,
                              batch_size=1)
        batches = iter(loader)
        for _ in range(STEPS):
            next(batches)
        state["dataloader"] = loader
    except Missing as exc:
        note, version = str(exc), None
    dcp.save(state, os.path.join(handoff, SUBDIR))
    return {"dataloader": None if note else "torchtitan %s ParallelAwareDataloader" % version,
            "dataloader_missing": note, "last_epoch": sched.last_epoch}


def resume(ctx, c, dcp, meta, torch):
    """Follow-up phase: load the lr scheduler, then the dataloader, at this world size."""
    saved = meta["saved_world_size"]
    info = meta.get("train_state")
    if not info:
        c.skip("the %d-rank run saved no train state (see fsdp.save_load)" % saved)
    path = os.path.join(ctx.handoff, SUBDIR)
    sched = _scheduler(torch)
    dcp.load({"lr_scheduler": sched}, path)
    c.data = {"saved_world_size": saved, "loaded_world_size": ctx.world_size,
              "lr_scheduler_last_epoch": sched.last_epoch}
    if sched.last_epoch != info["last_epoch"]:
        c.fail("the lr scheduler loaded by %d rank(s) is at step %d, saved at step %d"
               % (ctx.world_size, sched.last_epoch, info["last_epoch"]))
    what = "lr scheduler (LambdaLR) at step %d" % sched.last_epoch
    if not info["dataloader"]:
        c.detail = ("saved by %d ranks, loaded by %d: %s; per-rank dataloader state not "
                    "checked (%s)" % (saved, ctx.world_size, what, info["dataloader_missing"]))
        return
    loader_class, version = titan_dataloader_class()
    loader = loader_class(_dataset(torch), dp_rank=ctx.rank, dp_world_size=ctx.world_size,
                          batch_size=1)
    c.advice = ADVICE
    try:
        dcp.load({"dataloader": loader}, path)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        # DCP's CheckpointException, by rank (DcpFailed keeps it as by_rank)
        failures = getattr(exc, "by_rank", None) or getattr(exc, "failures", None)
        if isinstance(failures, dict) and failures and ctx.rank not in failures:
            # Every rank raises DCP's collective error; this rank's own part loaded. The
            # ranks whose part failed fail the check, so the report names them.
            c.data["loaded_here"] = True
            c.detail = ("saved by %d ranks, loaded by %d: %s; this rank's %s state "
                        "loaded, rank(s) %s's did not" % (
                            saved, ctx.world_size, what, info["dataloader"],
                            ",".join(map(str, sorted(failures)))))
            return
        c.fail("%s loaded; the %s state, saved by %d ranks, does not load at %d: "
               "%s" % (what, info["dataloader"], saved, ctx.world_size, _line(exc)))
    c.detail = ("saved by %d ranks, loaded by %d: %s, and %s's per-rank state"
                % (saved, ctx.world_size, what, info["dataloader"]))


ADVICE = (
    "TorchTitan keeps the dataloader's position per data-parallel rank, and does not "
    "reshard it: to resume at another number of GPUs, leave it out of the load "
    "(--checkpoint.exclude_from_loading dataloader; the dataloader then starts from the "
    "beginning of its data), or resume at the saved world size; the model, optimizer and "
    "lr scheduler do load (fsdp.reshard_grow/reshard_shrink)")


def _line(exc):
    text = " ".join(str(exc).split())
    failures = getattr(exc, "failures", None)
    if failures:
        rank = sorted(failures)[0]
        inner = failures[rank]
        inner = inner[0] if isinstance(inner, tuple) else inner
        return "DCP failed on rank %d: %s: %s" % (rank, type(inner).__name__,
                                                 " ".join(str(inner).split())[:200])
    if type(exc).__name__ == "DcpFailed":  # the adapter's message names the ranks
        return text[:300]
    return "%s: %s" % (type(exc).__name__, text[:200])
