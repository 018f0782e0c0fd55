"""ddp-sync: when ranks disagree about the model, does DDP fail fast instead of hanging?

Real failure: a Lightning Fabric user's two ranks froze in DistributedDataParallel's
``_verify_params_across_processes`` because ``fabric.launch()`` sat in a trainer's
``__init__`` and the ranks fell out of step. DDP is supposed to compare parameter counts
and shapes across ranks at construction and raise on every rank; these checks build DDP
on deliberately mismatched models and measure how long that takes and what it says. Each
mismatch runs on its own gloo subgroup with a short timeout, so a rank that misses the
mismatch is reported in seconds instead of hanging the probe. A DDP that *accepts* mismatched models is a failure: training would diverge
silently or hang at the first backward.
"""

import datetime
import time
import traceback

# The checks this probe reports, in the order it runs them (``envcheck probes --checks``,
# the matrix validation and the ranks read this; a check not declared here is an error).
CHECKS = (
    "mismatched_shapes",
    "extra_parameter",
    "barrier_after_setup",
)

# How long a rank may take to notice a mismatch before it counts as "did not fail fast".
# Detection is one allgather of parameter metadata: milliseconds when ranks are in step.
FAIL_FAST_S = 3.0


def _where(exc):
    """The innermost torch function the rank was in when it gave up."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "torch" in f.filename]
    return frames[-1].name if frames else "DDP's constructor"


def _is_timeout(exc, seconds):
    text = str(exc).lower()
    return seconds >= FAIL_FAST_S * 0.9 or "timed out" in text or "timeout" in text


def _mismatch(ctx, c, build_local_model, what):
    """Build DDP on a model that differs across ranks, on a gloo subgroup with a short
    timeout: a rank that does not detect the mismatch blocks in a collective, and the
    timeout turns that would-be hang into an answer instead of stalling the probe."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    # A rank that detected the previous mismatch raced ahead; meet on the default group
    # (long timeout) so the short one below only measures DDP.
    dist.barrier()
    group = dist.new_group(ranks=list(range(ctx.world_size)), backend="gloo",
                           timeout=datetime.timedelta(seconds=FAIL_FAST_S))
    dist.barrier(group=group)
    model = build_local_model()  # CPU: DDP's verification does not depend on the device
    t0 = time.monotonic()
    try:
        DDP(model, process_group=group)
    except Exception as exc:
        seconds = time.monotonic() - t0
        text = str(exc).strip()
        message = text.splitlines()[0] if text else type(exc).__name__
        c.data = {"seconds_to_failure": seconds, "error_type": type(exc).__name__,
                  "message": text[:2000], "where": _where(exc)}
        if _is_timeout(exc, seconds):
            c.fail("no error on this rank although %s: DDP waited in %s until the "
                   "%g s timeout (with the default timeout it hangs, as in the Lightning "
                   "Fabric report)" % (what, _where(exc), FAIL_FAST_S),
                   advice="DDP only detects this mismatch on some ranks: make every rank "
                          "build the same model, set timeout= in init_process_group, and "
                          "debug with TORCH_DISTRIBUTED_DEBUG=DETAIL")
        c.detail = "raised in %.2f s: %s" % (seconds, message[:120])
        return
    c.fail("DDP raised nothing although %s" % what,
           advice="make every rank build the same model before wrapping it in DDP; "
                  "a mismatch that DDP accepts diverges silently or hangs in backward")


def probe_ddp_sync(ctx):
    """DDP on mismatched models fails fast with a clear error; all ranks reach a barrier after setup"""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    last = ctx.world_size - 1

    with ctx.check("mismatched_shapes") as c:
        _mismatch(ctx, c, lambda: torch.nn.Linear(8, 8 if ctx.rank != last else 9),
                  "rank %d has a parameter of another shape" % last)

    with ctx.check("extra_parameter") as c:
        def build():
            layers = [torch.nn.Linear(8, 8)]
            if ctx.rank == last:
                layers.append(torch.nn.Linear(8, 8))
            return torch.nn.Sequential(*layers)
        _mismatch(ctx, c, build, "rank %d has an extra parameter" % last)

    with ctx.check("barrier_after_setup") as c:
        c.advice = ("ranks did not all reach the barrier after building DDP: make every "
                    "rank run the same setup code in the same order (launch before "
                    "building models and trainers)")
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 8).to(ctx.device)
        ids = [ctx.local_rank] if ctx.device.type == "cuda" else None
        t0 = time.monotonic()
        ddp = DDP(model, device_ids=ids)
        built = time.monotonic() - t0
        dist.barrier()
        ddp(torch.ones(2, 8, device=ctx.device)).sum().backward()
        c.data = {"ddp_construction_s": built, "barrier_s": time.monotonic() - t0 - built}
        c.detail = "DDP built in %.2f s, all %d ranks at the barrier, one backward" % (
            built, ctx.world_size)
