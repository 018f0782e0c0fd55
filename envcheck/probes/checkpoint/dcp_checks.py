"""The bodies of the checkpoint probe's DCP (torch.distributed.checkpoint) checks.

``probes/checkpoint.py`` opens each check (``with ctx.check("dcp_save_load") as c``: check
ids are read from the probe's source) and calls the body here with ``c``. They share one
directory every rank writes to, and one precondition: DCP exchanges its save/load plans
with object collectives, which fail on the coordinating rank only when torch cannot use
numpy, leaving the other ranks blocked; ``object_collectives`` tries
``all_gather_object`` first, which fails on every rank alike.
"""

import os
import warnings

from ..shared.files import quiet_load
from ..shared.agree import sync_replicas
from ..shared.state import clone, count_tensors, cpu, local, per_rank, special_tensors, zeros

_DEDUP_ADVICE = ("make replicated state identical on every rank before a DCP save "
                 "(DDP keeps parameters so; broadcast from rank 0 what it does not cover)")
_SNAPSHOT_ADVICE = (
    "do not modify the state until async_save's future has completed (fut.result() "
    "before the next optimizer step), or hand async_save a copy "
    "({k: v.clone() for k, v in state.items()}): this torch stages %s tensors without "
    "copying them")


def _sharded(ctx, torch):
    """(full tensor, its Shard(0) DTensor, how) or (None, None, why not)."""
    from ..shared.dcp import DcpMissing, sharding_api

    try:
        distribute_tensor, Shard, init_device_mesh, where = sharding_api(torch)
    except DcpMissing as exc:
        return None, None, str(exc)
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    full = (torch.arange(ctx.world_size * 6 * 4, dtype=torch.float32,
                         device=ctx.device).reshape(-1, 4) / 7)
    return full, distribute_tensor(full, mesh, [Shard(0)]), "%s DTensor Shard(0)" % where


def _dcp_state(ctx, subject, torch):
    """Replicated model state (identical on every rank), a per-rank entry, a DTensor."""
    state = {"model": subject.model.state_dict(),
             "tensors": special_tensors(torch, ctx.device),
             "rank%d" % ctx.rank: per_rank(torch, ctx.device, ctx.rank)}
    full, dt, how = _sharded(ctx, torch)
    if dt is not None:
        state["sharded"] = dt
    return state, full, how


def save_load(ctx, c, subject, dcp, skip, gate, shared, files, torch):
    """Body of checkpoint.dcp_save_load; returns what the later checks need."""
    from ..shared.files import diff_state
    from ...worker.hazards import advice_for, numpy_version

    error, failed = gate
    if skip:
        c.skip(skip)
    if failed:
        if error is None:
            c.fail("DCP not run: dist.all_gather_object fails on rank(s) %s (see their "
                   "detail)" % ",".join(map(str, failed)))
        importable, version = numpy_version()
        c.data = {"numpy_importable": importable, "numpy": version}
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        if "Numpy is not available" in first:
            c.detail = ("%s: DCP cannot exchange its save/load plans (all_gather_object "
                        "raised RuntimeError: Numpy is not available)" % _numpy_problem())
        c.fail("DCP not run: it exchanges its save/load plans with object collectives, "
               "and dist.all_gather_object raised %s: %s"
               % (type(error).__name__, first), advice=advice_for(error))
    if subject.skip:
        c.skip(subject.skip)
    differed = sync_replicas(ctx, subject.model, torch) if subject.spec else False
    state, full, how = _dcp_state(ctx, subject, torch)
    path = os.path.join(shared, "dcp")
    dcp.save(state, path)
    expected = clone(state, torch)
    fresh = subject.fresh()
    with torch.no_grad():
        for t in fresh.state_dict().values():
            if isinstance(t, torch.Tensor):
                t.zero_()
    target = {k: (fresh.state_dict() if k == "model" else zeros(v, torch))
              for k, v in state.items()}
    dcp.load(target, path)
    got = dict(target, model=fresh.state_dict())
    differ = diff_state(local(expected), local(got), torch)
    if differ:
        c.fail("%d entries differ after the DCP round trip on rank %d: %s"
               % (len(differ), ctx.rank, ", ".join(differ[:5])))
    files.append(("dcp/.metadata", os.path.join(path, ".metadata")))
    names = sorted(os.listdir(path))
    c.detail = ("%s: saved by %d ranks, loaded into a fresh model, %d tensors bit-exact "
                "on every rank (replicated, per-rank%s) with %s"
                % (subject.label, ctx.world_size, count_tensors(state, torch),
                   ", %s" % how if "sharded" in state else "", dcp.api))
    c.data = {"api": dcp.api, "files": names, "sharded": how if "sharded" in state else None,
              "bytes": sum(os.path.getsize(os.path.join(path, n)) for n in names),
              "dir": shared}
    if subject.spec:
        c.data["replicas_differed_before_sync"] = differed
        if differed:
            c.detail += ("; your model's ranks started with different weights: they were "
                         "made identical from rank 0 first (see dcp_dedup for why)")
    return {"path": path, "full": full if "sharded" in state else None,
              "model": expected["model"], "label": subject.label}


def _numpy_problem():
    from ...worker.hazards import numpy_version

    importable, version = numpy_version()
    if not importable:
        return "numpy is not installed"
    return "numpy %s is installed but this torch cannot use it" % (version or "")


def dedup(ctx, c, dcp, skip, shared, files, torch):
    """Body of checkpoint.dcp_dedup."""
    if skip:
        c.skip(skip)
    from ...worker.gather import all_gather_ints

    c.advice = _DEDUP_ADVICE
    # A state of its own, never the --model: what DCP does with replicas that drifted
    # apart does not depend on the model, and the names must not read as the user's.
    sizes = {"test_state.layer0.weight": 4096, "test_state.layer0.bias": 64,
             "test_state.layer1.weight": 1024, "test_state.layer1.bias": 16}
    # The same names on every rank, different values: replicas that drifted apart.
    state = {k: torch.full((n,), float(ctx.rank + 1), device=ctx.device)
             for k, n in sizes.items()}
    path = os.path.join(shared, "dedup")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dcp.save(state, path)
    files.append(("dedup/.metadata", os.path.join(path, ".metadata")))
    loaded = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(loaded, path)
    winners = {}
    for k, t in loaded.items():
        values = sorted(set(t.cpu().tolist()))
        ok = len(values) == 1 and values[0] in [float(r + 1) for r in range(ctx.world_size)]
        winners[k] = int(values[0]) - 1 if ok else -1
    everyone = all_gather_ints(ctx, list(winners.values()))
    c.data = {"api": dcp.api, "kept_from_rank": winners,
              "warnings": sorted({"%s: %s" % (w.category.__name__,
                                              str(w.message).splitlines()[0][:120])
                                  for w in caught})}
    torn = [k for k, w in winners.items() if w < 0]
    if torn:
        c.fail("replicas that differ were saved as a mix within one tensor: %s holds "
               "values from several ranks" % ", ".join(torn))
    if any(row != everyone[0] for row in everyone):
        c.fail("ranks loaded different values for the same checkpoint: %s" % everyone)
    by_rank = {}
    for k, w in winners.items():
        by_rank.setdefault(w, []).append(k)
    kept = " and ".join("rank %d's values for %s" % (r, ", ".join(ks))
                        for r, ks in sorted(by_rank.items()))
    c.detail = ("hazard: replicas that differ are saved without an error or warning; "
                "on a 4-tensor test state, DCP kept %s, the other ranks' values are gone%s. "
                "Make replicas identical before saving"
                % (kept, " (one checkpoint mixes ranks)" if len(by_rank) > 1 else ""))


def reshard_load(ctx, c, dcp, skip, saved, mine, files, torch):
    """Body of checkpoint.reshard_load: the N-rank checkpoint loaded by one process alone."""
    if skip:
        c.skip(skip)
    from ..shared.files import diff_state
    from ..shared.dcp import DcpMissing

    path = saved["path"]
    expected = {"model": saved["model"], "tensors": special_tensors(torch, ctx.device)}
    for r in range(ctx.world_size):
        expected["rank%d" % r] = per_rank(torch, ctx.device, r)
    full = saved["full"]
    if full is not None:
        expected["sharded"] = full
    target = zeros(expected, torch)
    try:
        how = dcp.load_alone(target, path)
    except DcpMissing as exc:
        c.skip(str(exc))
    differ = diff_state(expected, target, torch)
    if differ:
        c.fail("%d entries differ when one process loads the %d-rank checkpoint: %s"
               % (len(differ), ctx.world_size, ", ".join(differ[:5])))
    c.detail = ("%s: the %d-rank checkpoint loaded by one process alone (%s), %d "
                "tensors bit-exact%s" % (saved["label"], ctx.world_size, how,
                                         count_tensors(expected, torch),
                                 ", the Shard(0) DTensor reassembled whole"
                                 if full is not None else ""))
    c.data = {"load": how, "world_size_saved": ctx.world_size, "world_size_loaded": 1}
    out = os.path.join(mine, "converted.pt")
    try:
        conv = dcp.to_torch_save(path, out)
    except DcpMissing as exc:
        c.data["convert"] = None
        c.detail += "; no conversion to torch.save: %s" % exc
        return
    files.append(("converted.pt", out))
    converted = quiet_load(torch, out, map_location=ctx.device)
    differ = diff_state(cpu(expected), cpu({k: converted[k] for k in expected}), torch)
    if differ:
        c.fail("%d entries differ in the torch.save file from %s: %s"
               % (len(differ), conv, ", ".join(differ[:5])))
    c.data["convert"] = conv
    c.detail += "; converted to one torch.save file (%s), bit-exact" % conv


def async_setup(ctx, dcp, skip, torch):
    """(skip reason, process group, note) shared by the two async_save checks."""
    import torch.distributed as dist

    if not skip and not dcp.has_async_save:
        skip = "torch %s has no torch.distributed.checkpoint.async_save" % torch.__version__
    group, note = None, ""
    if not skip and ctx.backend != "gloo":
        # async_save stages through the CPU: it refuses a group without a CPU backend.
        group = dist.new_group(backend="gloo")
        note = " (on a gloo group: async_save needs a CPU-capable process group)"
    return skip, group, note


def async_save(ctx, c, subject, dcp, skip, group, note, shared, files, torch):
    """Body of checkpoint.async_save."""
    import time

    from ..shared.files import diff_state

    if skip:
        c.skip(skip)
    state = {"model": subject.model.state_dict(),
             "tensors": special_tensors(torch, ctx.device),
             "rank%d" % ctx.rank: per_rank(torch, ctx.device, ctx.rank)}
    expected = clone(state, torch)
    path = os.path.join(shared, "async")
    t0 = time.monotonic()
    future = dcp.async_save(state, path, group)
    returned = time.monotonic() - t0
    future.result(timeout=ctx.timeout)
    done = time.monotonic() - t0
    files.append(("async/.metadata", os.path.join(path, ".metadata")))
    target = zeros(expected, torch)
    dcp.load(target, path)
    differ = diff_state(expected, target, torch)
    if differ:
        c.fail("%d entries differ after async_save and load: %s"
               % (len(differ), ", ".join(differ[:5])))
    c.detail = ("%s: dcp.async_save returned in %.3f s, its future completed in %.3f "
                "s; %d tensors loaded back bit-exact on every rank%s"
                % (subject.label, returned, done, count_tensors(state, torch), note))
    c.data = {"returned_s": round(returned, 6), "completed_s": round(done, 6)}


def async_snapshot(ctx, c, dcp, skip, group, shared, files, torch):
    """Body of checkpoint.async_snapshot."""
    if skip:
        c.skip(skip)
    c.advice = _SNAPSHOT_ADVICE % ctx.device.type
    # Large enough that the writer thread cannot be done before the next line runs.
    state = {"weights": torch.full((1 << 20,), 1.0, device=ctx.device)}
    path = os.path.join(shared, "snapshot")
    future = dcp.async_save(state, path, group)
    state["weights"].fill_(2.0)  # the next optimizer step, before the save completes
    future.result(timeout=ctx.timeout)
    files.append(("snapshot/.metadata", os.path.join(path, ".metadata")))
    target = {"weights": torch.zeros_like(state["weights"])}
    dcp.load(target, path)
    # Its smallest and largest value: all it takes to tell 1.0 everywhere (copied), 2.0
    # everywhere (not copied) and a mix (torn), without sorting a million floats.
    loaded = target["weights"]
    values = sorted({float(loaded.min()), float(loaded.max())})
    c.data = {"saved_min_max": [values[0], values[-1]], "device": ctx.device.type}
    if values == [2.0]:
        c.fail("the checkpoint holds values written after async_save returned: this "
               "torch did not copy the %s tensors when it staged them" % ctx.device.type)
    if values != [1.0]:
        c.fail("torn checkpoint: it mixes values from before and after async_save "
               "returned (from %g to %g)" % (values[0], values[-1]))
    c.detail = ("async_save copied the %s state when called: an update right after it "
                "returned did not reach the checkpoint" % ctx.device.type)
