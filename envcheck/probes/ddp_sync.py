"""ddp-sync: when ranks disagree about the model, or fall out of step, does DDP's setup end
instead of hanging?

Two failures users meet at DDP's construction:

- **Ranks that disagree about the model** (``mismatched_shapes``, ``extra_parameter``).
  DDP compares parameter counts and shapes across ranks and is supposed to raise on every
  rank. A different count is detected everywhere; a different shape only on the rank whose
  shapes differ. Which other ranks wait depends on the world size: at 2 ranks rank 0 waits
  in ``_sync_params_and_buffers``; at 3 and 4 some ranks wait and the others go on as if
  nothing were wrong (which ones follows gloo's broadcast tree; seen with torch 2.13). In a
  training script the rank that raised exits, and a waiting rank is released within a
  second or two ("Connection closed by peer"; observed with plain DDP and Lightning Fabric
  2.6.6); it hangs only where the raising rank lives on (it caught the error). Each
  mismatch runs on a subgroup that a rank can leave (``worker/leaving.py``), as a rank
  that exits would, so envcheck never waits on its own probe. A DDP that *accepts*
  mismatched models is a failure: training would diverge silently or hang at the first
  backward.
- **Ranks out of step** (``out_of_step``): one rank never reaches DDP's setup (or reaches
  it after the others gave up). This is the Lightning Fabric report (the project's seed
  002): ``fabric.launch()`` sat in a trainer's ``__init__``, the ranks fell out of step,
  and the others froze in ``_verify_param_shape_across_processes`` with nothing to end
  the wait but the process group's timeout, 30 minutes by default. The check leaves the
  last rank out on a subgroup with a short ``timeout=`` and reports what the others do:
  with that timeout DDP raises; without one they wait for the default, whose value this
  torch reports.
"""

import datetime
import time

from ..worker import leaving

# The explicit timeout= of the out-of-step demonstration. The others wait on a rank that
# never comes, so any timeout ends their wait the same way: a short one keeps the check
# cheap (every run pays it). The subgroup's connections are up before it counts
# (leaving.fresh_group), so it only times DDP's wait for the missing rank.
OUT_OF_STEP_TIMEOUT_S = 0.25


def _warm_up():
    """DDP's first construction imports torch._dynamo (seconds per rank). Import it
    before the short timeout starts counting, so a slow import never looks like a hang."""
    try:
        import torch._dynamo  # noqa: F401
    except Exception:  # older torch has none; an import error here is not ours to judge
        pass


def _mismatch(ctx, c, group, build_local_model, what):
    """Build DDP on a model that differs across ranks, then judge the job as a whole.

    Every rank learns what every other rank saw (``leaving.try_setup``), so all ranks
    report the same words whatever the world size: DDP raised on every rank (it fails
    fast), or only on some while the others waited for it or went on.
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    if ctx.world_size < 2:
        c.skip("needs 2 ranks that disagree about the model, found 1")
    model = build_local_model()  # CPU: DDP's verification does not depend on the device
    tried = leaving.try_setup(ctx, group, "envcheck/ddp-sync/%s/" % c.name,
                              lambda g: DDP(model, process_group=g))
    c.data = dict(tried.data, ranks=tried.by_kind)
    by_kind = tried.by_kind
    if len(by_kind["raised"]) == ctx.world_size:
        c.detail = "raised on all %d ranks, here in %.2f s: %s" % (
            ctx.world_size, c.data["seconds_to_failure"], tried.first_lines[ctx.rank][:120])
        return
    others = []
    if by_kind["waited"]:
        # Blocked in DDP's setup until the rank that raised left (as a rank that exits on
        # the error does); ``data`` has the seconds. Never "a hang": that needs the
        # raising rank to live on, which is not what this check shows.
        others.append("rank(s) %s blocked in DDP's setup until it left"
                      % leaving.ranks_text(by_kind["waited"]))
    if by_kind["went_on"]:
        others.append("rank(s) %s went on with no error"
                      % leaving.ranks_text(by_kind["went_on"]))
    if not by_kind["raised"]:
        c.fail("DDP raised on no rank although %s: %s" % (what, "; ".join(others)),
               advice="make every rank build the same model before wrapping it in DDP; "
                      "a mismatch that DDP accepts diverges silently or hangs in backward")
    c.fail("DDP raised only on rank(s) %s of %d although %s; %s"
           % (leaving.ranks_text(by_kind["raised"]), ctx.world_size, what, "; ".join(others)),
           advice="DDP detects this mismatch only on the rank(s) whose shapes differ: make "
                  "every rank build the same model, and let a rank that raises exit (its "
                  "peers are then released; a rank that catches the error and lives on "
                  "leaves them waiting in DDP's setup); debug with "
                  "TORCH_DISTRIBUTED_DEBUG=DETAIL")


def _default_timeouts():
    """{"gloo": seconds, "nccl": seconds}: what init_process_group gives a group without
    timeout= in this torch (torch.distributed.constants), where it says."""
    try:
        from torch.distributed import constants
    except Exception:
        return {}
    out = {}
    for backend, name in (("gloo", "default_pg_timeout"), ("nccl", "default_pg_nccl_timeout")):
        value = getattr(constants, name, None)
        if value is not None:
            out[backend] = value.total_seconds()
    return out


def _minutes(seconds):
    return ("%g min" % (seconds / 60)) if seconds >= 60 else ("%g s" % seconds)


def _out_of_step(ctx, c, group, torch):
    """The last rank never reaches DDP's setup; the others, on a subgroup with an
    explicit short timeout, must get an error instead of waiting for ever."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ..worker.gather import all_gather_strings

    if ctx.world_size < 2:
        c.skip("needs 2 ranks, one of which stays out of step, found 1")
    group, _ = group
    last = ctx.world_size - 1
    defaults = _default_timeouts()
    backend = str(torch.distributed.get_backend())  # the job's, as the user's would be
    default_s = defaults.get(backend)
    seen, seconds, first, at = "absent", None, "", ""
    if ctx.rank != last:
        t0 = time.monotonic()
        try:
            DDP(torch.nn.Linear(8, 8), process_group=group)
            seen = "went_on"
        except Exception as exc:
            seconds = time.monotonic() - t0
            seen = "timed_out" if leaving.is_timeout(exc) else "raised"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
            at = leaving.where(exc)
            c.data = {"seconds_to_error": seconds, "error_type": type(exc).__name__,
                      "where": leaving.where(exc), "message": str(exc)[:2000]}
    # The last rank meets the others here, on the default group, once they gave up.
    everyone = all_gather_strings(ctx, "%s|%s|%s|%s" % (
        seen, "" if seconds is None else "%.2f" % seconds, at, first))
    reports = [e.split("|", 3) for e in everyone[:last]]
    c.data = dict(c.data or {}, timeout_s=OUT_OF_STEP_TIMEOUT_S,
                  default_timeout_s=defaults, seen=[r[0] for r in reports])
    default_words = ("the default process-group timeout, %s for %s in this torch "
                     "(torch.distributed.constants)" % (_minutes(default_s), backend)
                     if default_s else "the process group's timeout")
    if any(r[0] == "went_on" for r in reports):
        c.fail("DDP's setup went on without rank %d on rank(s) %s: it did not wait for the "
               "rank that is out of step" % (last, leaving.ranks_text(
                   [r for r, rep in enumerate(reports) if rep[0] == "went_on"])))
    late = max(float(r[1]) for r in reports)
    rank0 = reports[0]
    c.fail("rank %d never reached DDP's setup: rank(s) %s waited for it in %s, a hang "
           "bounded only by %s; with timeout=%g s DDP raised after %.1f s: %s"
           % (last, leaving.ranks_text(range(last)), rank0[2] or "DDP's setup",
              default_words, OUT_OF_STEP_TIMEOUT_S, late, rank0[3]),
           advice="a rank that never reaches DDP's setup leaves the others waiting for "
                  "%s: pass timeout= to init_process_group (an error instead of the wait), "
                  "and make every rank reach the setup (launch before building models and "
                  "trainers)" % (_minutes(default_s) if default_s else "the default timeout"))


def probe_ddp_sync(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    last = ctx.world_size - 1
    _warm_up()

    group = leaving.fresh_group(ctx) if ctx.world_size > 1 else None
    with ctx.check("mismatched_shapes") as c:
        _mismatch(ctx, c, group, lambda: torch.nn.Linear(8, 8 if ctx.rank != last else 9),
                  "rank %d has a parameter of another shape" % last)

    def build():
        layers = [torch.nn.Linear(8, 8)]
        if ctx.rank == last:
            layers.append(torch.nn.Linear(8, 8))
        return torch.nn.Sequential(*layers)

    group = leaving.fresh_group(ctx) if ctx.world_size > 1 else None
    with ctx.check("extra_parameter") as c:
        _mismatch(ctx, c, group, build, "rank %d has an extra parameter" % last)

    group = (leaving.fresh_group(ctx, OUT_OF_STEP_TIMEOUT_S) if ctx.world_size > 1
             else None)
    with ctx.check("out_of_step") as c:
        _out_of_step(ctx, c, group, torch)

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
