"""nccl: which NCCL, does it initialise on every local GPU, are its results right, how fast?

Real failure: NCCL jobs that initialise and then hang or crawl because of a broken
transport (P2P, shared memory, InfiniBand), a mismatched NCCL between nodes, or an
NCCL_* variable left over from another cluster. Checks:

- ``version``: the NCCL this torch bundles, the same on every rank;
- ``env``: the NCCL_* variables set for each rank (reported, never judged);
- ``p2p``: each rank copies a buffer from its GPU to every other GPU of its host and
  back: whether the pair has peer-to-peer access, whether the data arrives intact. A
  copy that hangs is the PCIe ACS / IOMMU symptom that hangs NCCL's P2P transport
  (NVIDIA/nccl#631, #2079; ``envcheck explain``'s ``nccl.p2p_hang``); the probe's
  timeout turns it into a hang with the rank's stack. GPU only: unverified on hardware;
- ``init``: a fresh NCCL communicator over all ranks, one per GPU, timed;
- ``collectives``: all_reduce (fp32, bf16, 16 MiB), broadcast, all_gather,
  reduce_scatter and a send/recv ring give exactly the predicted values;
- ``bandwidth``: all_reduce bus bandwidth over a range of sizes, as nccl-tests reports it.

Where there is no CUDA (a CPU wheel, no visible GPU, or ranks on gloo) the NCCL checks
are ``skipped`` with the reason in numbers, and ``bandwidth`` runs the same measurement
over gloo on CPU, so that its code path is exercised everywhere.

Bandwidth follows nccl-tests (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md and
src/all_reduce.cu ``AllReduceGetBw``), in GB/s = 1e9 bytes/s:

    algbw = S / t                 S: bytes of the buffer, t: seconds per operation
    busbw = algbw * 2*(n-1)/n     all_reduce over n ranks: "2(n-1) data transfers ...
                                  n links of bandwidth B" (n = 1 gives 0, as there)

``t`` is measured as nccl-tests' BenchTime does: warmup iterations first, then one timer
around ``iters`` back-to-back operations, waited for at the end, divided by ``iters``.
Across ranks this takes the *maximum* of ``t`` (the slowest rank bounds a collective),
which is ``all_reduce_perf -a 3``; nccl-tests' default (``-a 1``) averages ranks, so our
figure is the same or slightly lower. Only the in-place variant is timed (torch's
all_reduce is in place); after timing, each size is checked once for wrong elements
(nccl-tests' ``#wrong``).
"""

import os
import time

from .shared.units import human_bytes, sync_device
from ..worker.environment import nccl_version_string

# Sizes in bytes. GPU: nccl-tests territory (latency to bandwidth), a few seconds at
# most even over PCIe. CPU/gloo: small, so the default suite stays fast.
GPU_SIZES = (64 << 10, 1 << 20, 16 << 20, 128 << 20)
GPU_WARMUP, GPU_ITERS = 5, 20  # nccl-tests' defaults (-w 5 -n 20)
# Up to 1 MiB: across hosts the bandwidth probe times each host's link properly, and this
# all_reduce's 4 MiB step cost a 2-host run 0.1 s for a figure nobody judges.
CPU_SIZES = (4 << 10, 64 << 10, 1 << 20)
CPU_WARMUP, CPU_ITERS = 1, 3  # gloo on CPU: a loopback sanity figure, not a benchmark


def busbw_factor(n):
    return 2.0 * (n - 1) / n


def bandwidth_row(nbytes, seconds, n):
    algbw = nbytes / seconds / 1e9
    return {"bytes": nbytes, "time_us": round(seconds * 1e6, 2),
            "algbw_gbs": round(algbw, 4), "busbw_gbs": round(algbw * busbw_factor(n), 4)}


def _no_nccl_reason(torch, ctx):
    """Why this rank cannot run NCCL, in numbers; None when it can."""
    if not getattr(torch.version, "cuda", None):
        return "torch %s is a CPU build (torch.version.cuda is None): no NCCL" % \
            torch.__version__
    if not torch.distributed.is_nccl_available():
        return "torch %s was built without NCCL (is_nccl_available() is False)" % \
            torch.__version__
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return "0 CUDA devices visible to rank %d (CUDA_VISIBLE_DEVICES=%s)" % (
            ctx.rank, os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
    if ctx.backend != "nccl":
        return "ranks run on %s, not nccl (%d CUDA device(s) here): use --backend nccl " \
               "or auto with one rank per GPU" % (ctx.backend, count)
    return None


def measure_allreduce(torch, dist, ctx, group, device, sizes, warmup, iters):
    """nccl-tests' all_reduce_perf loop: per size, time, max over ranks, #wrong."""
    n = dist.get_world_size(group)
    expected = n * (n + 1) / 2
    buf = torch.zeros(max(sizes) // 4, dtype=torch.float32, device=device)
    # Warm up at the largest and the smallest size, as nccl-tests' TimeTest does.
    for nbytes in (max(sizes), min(sizes)):
        view = buf[:nbytes // 4]
        for _ in range(warmup):
            dist.all_reduce(view, group=group)
    sync_device(torch, device)
    rows = []
    for nbytes in sizes:
        view = buf[:nbytes // 4]
        view.zero_()  # sums of zeros stay zero, however many iterations
        dist.barrier(group=group)
        sync_device(torch, device)
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(view, group=group)
        sync_device(torch, device)
        seconds = (time.perf_counter() - t0) / iters
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
        view.fill_(float(ctx.rank + 1))
        dist.all_reduce(view, group=group)
        wrong = int((view != expected).sum().item())
        row = bandwidth_row(nbytes, float(slowest.item()), n)
        row["count"] = nbytes // 4
        row["wrong"] = wrong
        rows.append(row)
    return rows


def probe_nccl(ctx):
    """This probe's name, summary and checks are declared in probes/suite.py."""
    import torch
    import torch.distributed as dist

    no_nccl = _no_nccl_reason(torch, ctx)
    with ctx.check("version") as c:
        _version(ctx, c, torch, no_nccl)
    with ctx.check("env") as c:
        _env(ctx, c, no_nccl)
    with ctx.check("p2p") as c:
        _p2p(ctx, c, torch, no_nccl)
    comm = {}
    with ctx.check("init") as c:
        _init(ctx, c, torch, dist, no_nccl, comm)
    group = comm.get("group")
    with ctx.check("collectives") as c:
        if group is None:
            c.skip(no_nccl or "the NCCL communicator did not initialise (see nccl.init)")
        c.advice = ("NCCL returned wrong values: suspect the transport; rerun with "
                    "NCCL_DEBUG=INFO and try NCCL_P2P_DISABLE=1, then NCCL_SHM_DISABLE=1, "
                    "then NCCL_IB_DISABLE=1 to find the broken path")
        _nccl_collectives(torch, dist, ctx, group, c)
    with ctx.check("bandwidth") as c:
        _bandwidth(ctx, c, torch, dist, group)


def _version(ctx, c, torch, no_nccl):
    from ..worker.gather import all_gather_strings

    c.advice = ("every rank must load the same NCCL: install the same torch wheel on "
                "every node, and do not put another libnccl on LD_LIBRARY_PATH")
    if not getattr(torch.version, "cuda", None):
        c.skip(no_nccl)
    version = nccl_version_string(torch.cuda.nccl.version())
    versions = all_gather_strings(ctx, "%s|%s" % (version, ctx.host))
    c.data = {"nccl": version, "ranks": versions}
    others = sorted({v for v in versions if v.split("|")[0] != version})
    if others:
        c.fail("rank %d on %s has NCCL %s, but %s" % (
            ctx.rank, ctx.host, version, ", ".join(
                "rank %d on %s has %s" % (r, v.split("|")[1], v.split("|")[0])
                for r, v in enumerate(versions) if v.split("|")[0] != version)))
    c.detail = "NCCL %s (torch %s, CUDA %s)" % (version, torch.__version__,
                                                 torch.version.cuda)
    if no_nccl:
        c.detail += "; not run here: %s" % no_nccl


P2P_BYTES = 16 << 20


def _p2p(ctx, c, torch, no_nccl):
    """This rank's GPU against every other GPU of the host: peer access, and a copy there
    and back that must arrive intact."""
    if not getattr(torch.version, "cuda", None) or not torch.cuda.is_available():
        c.skip(no_nccl or "no CUDA device visible to rank %d" % ctx.rank)
    count = torch.cuda.device_count()
    if count < 2:
        c.skip("%d CUDA device visible to rank %d (CUDA_VISIBLE_DEVICES=%s): P2P needs 2 "
               "GPUs in one process's view" % (count, ctx.rank,
                                                os.environ.get("CUDA_VISIBLE_DEVICES", "unset")))
    c.advice = ("copies between the GPUs of this host go wrong: PCIe ACS or the IOMMU "
                "break peer-to-peer (disable ACS on the PCIe switches, or boot with "
                "iommu=pt; update the driver); NCCL_P2P_DISABLE=1 works around it")
    mine = ctx.local_rank % count
    src = torch.arange(P2P_BYTES // 4, dtype=torch.float32, device="cuda:%d" % mine)
    pairs, bad = {}, []
    for other in range(count):
        if other == mine:
            continue
        peer = torch.cuda.can_device_access_peer(mine, other)
        there = src.to("cuda:%d" % other)
        back = there.to("cuda:%d" % mine)
        torch.cuda.synchronize(mine)
        torch.cuda.synchronize(other)
        intact = bool(torch.equal(back, src))
        pairs["%d-%d" % (mine, other)] = {"p2p": peer, "intact": intact}
        if not intact:
            bad.append(other)
    c.data = {"pairs": pairs}
    direct = [int(k.split("-")[1]) for k, v in pairs.items() if v["p2p"]]
    c.detail = "GPU %d with %s: %s" % (
        mine, ", ".join(str(o) for o in range(count) if o != mine),
        "peer-to-peer with %s" % ", ".join(map(str, direct)) if direct
        else "no peer-to-peer (copies go through the host)")
    if bad:
        c.fail("a %d MiB copy from GPU %d to GPU %s and back came back different"
               % (P2P_BYTES >> 20, mine, ", ".join(map(str, bad))))


def _env(ctx, c, no_nccl):
    from ..worker.environment import relevant_env

    nccl_env = {k: v for k, v in relevant_env().items() if k.startswith("NCCL_")}
    c.data = {"NCCL": nccl_env}
    c.detail = ", ".join("%s=%s" % kv for kv in sorted(nccl_env.items())) or \
        "no NCCL_* variable set"
    if no_nccl and nccl_env:
        c.detail += " (unused: backend %s)" % ctx.backend


def _init(ctx, c, torch, dist, no_nccl, comm):
    from ..worker.gather import all_gather_strings

    if no_nccl:
        c.skip(no_nccl)
    c.advice = ("NCCL could not set up its communicator: rerun with NCCL_DEBUG=INFO; "
                "check that every GPU is visible (nvidia-smi) and that "
                "NCCL_SOCKET_IFNAME names a NIC every node has")
    t0 = time.monotonic()
    # Kept even if this check then fails: the collectives check still runs on it.
    comm["group"] = group = dist.new_group(ranks=list(range(ctx.world_size)), backend="nccl")
    t = torch.ones(1, device=ctx.device)
    dist.all_reduce(t, group=group)  # NCCL creates its communicator lazily, here
    torch.cuda.synchronize(ctx.device)
    seconds = time.monotonic() - t0
    if t.item() != ctx.world_size:
        c.fail("first all_reduce on the new communicator: expected %d, got %s"
               % (ctx.world_size, t.item()))
    devices = all_gather_strings(ctx, "%s|%s" % (ctx.host, ctx.device))
    local = torch.cuda.device_count()
    c.data = {"seconds": seconds, "devices": devices, "local_gpus": local}
    c.detail = "communicator over %d GPU(s) on %d host(s) in %.2f s" % (
        ctx.world_size, len({d.split("|")[0] for d in devices}), seconds)
    if ctx.local_world_size < local:
        c.detail += "; %d of %d local GPUs untested (one rank per GPU covers all)" % (
            local - ctx.local_world_size, local)


def _bandwidth(ctx, c, torch, dist, group):
    """all_reduce bus bandwidth as nccl-tests measures it; over gloo on CPU."""
    if group is not None:
        device, sizes, warmup, iters = ctx.device, GPU_SIZES, GPU_WARMUP, GPU_ITERS
        backend = "nccl"
    else:
        device, sizes, warmup, iters = torch.device("cpu"), CPU_SIZES, CPU_WARMUP, \
            CPU_ITERS
        backend = dist.get_backend()
        if backend != "gloo":
            # A GPU-only backend without a communicator of ours: measure gloo.
            group = dist.new_group(backend="gloo")
            backend = "gloo"
    sizes = tuple(ctx.options.get("bandwidth_sizes") or sizes)
    rows = measure_allreduce(torch, dist, ctx, group, device, sizes, warmup, iters)
    c.data = {"backend": backend, "ranks": ctx.world_size, "op": "all_reduce sum",
              "dtype": "float32", "warmup": warmup, "iters": iters,
              "time": "max over ranks", "busbw_factor": busbw_factor(ctx.world_size),
              "sizes": rows}
    wrong = [r for r in rows if r["wrong"]]
    if wrong:
        c.fail("all_reduce gave wrong elements: %s" % ", ".join(
            "%d of %d at %s" % (r["wrong"], r["count"], human_bytes(r["bytes"]))
            for r in wrong),
            advice="the transport corrupts data: rerun with NCCL_DEBUG=INFO "
                   "(or GLOO_SOCKET_IFNAME on CPU)")
    peak = max(rows, key=lambda r: r["busbw_gbs"])
    c.data["peak_busbw_gbs"] = peak["busbw_gbs"]
    c.detail = "%s all_reduce, %d ranks: peak busbw %.2f GB/s at %s (algbw %.2f GB/s, " \
        "%s .. %s)" % (backend, ctx.world_size, peak["busbw_gbs"], human_bytes(peak["bytes"]),
                       peak["algbw_gbs"], human_bytes(min(sizes)), human_bytes(max(sizes)))
    if ctx.world_size == 1:
        c.detail += "; 1 rank: busbw is 0 by definition (2(n-1)/n)"


def _nccl_collectives(torch, dist, ctx, group, c):
    n, rank, dev = ctx.world_size, ctx.rank, ctx.device
    done = []

    def expect(name, got, want):
        if not torch.equal(got.cpu(), want.cpu()):
            diff = (got.cpu().float() != want.cpu().float()).sum().item()
            c.fail("%s: %d of %d elements wrong (first: got %s, expected %s)" % (
                name, diff, want.numel(), got.flatten()[0].item(), want.flatten()[0].item()))
        done.append(name)

    # Values every partial sum represents exactly: rank+1 in fp32 (sums < 2**24), 1 in
    # bf16 (integers up to 256 only), so a wrong element is a transport error, not rounding.
    cases = [(torch.float32, 1 << 10, rank + 1, n * (n + 1) // 2),
             (torch.float32, 4 << 20, rank + 1, n * (n + 1) // 2)]
    if n <= 256:
        cases.insert(1, (torch.bfloat16, 1 << 10, 1, n))
    for dtype, count, value, total in cases:
        t = torch.full((count,), float(value), dtype=dtype, device=dev)
        dist.all_reduce(t, group=group)
        expect("all_reduce %s x%d" % (str(dtype).replace("torch.", ""), count), t,
               torch.full((count,), float(total), dtype=dtype))

    src = n - 1
    t = torch.arange(4096, dtype=torch.float32, device=dev) if rank == src else \
        torch.zeros(4096, device=dev)
    dist.broadcast(t, src=src, group=group)
    expect("broadcast from rank %d" % src, t, torch.arange(4096, dtype=torch.float32))

    mine = torch.full((256,), float(rank), device=dev)
    out = [torch.empty_like(mine) for _ in range(n)]
    dist.all_gather(out, mine, group=group)
    expect("all_gather", torch.stack(out),
           torch.arange(n, dtype=torch.float32).repeat_interleave(256).view(n, 256))

    if hasattr(dist, "reduce_scatter_tensor"):
        # Block r holds r+1 on every rank, so rank r receives n*(r+1) everywhere.
        full = (torch.arange(n * 256, device=dev) // 256 + 1).float()
        part = torch.empty(256, device=dev)
        dist.reduce_scatter_tensor(part, full, group=group)
        expect("reduce_scatter", part, torch.full((256,), float(n * (rank + 1))))

    if n > 1:
        # The P2P path (NVLink / PCIe P2P / network), which collectives may not use.
        send = torch.full((1 << 18,), float(rank), device=dev)
        recv = torch.empty_like(send)
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % n, group=group),
               dist.P2POp(dist.irecv, recv, (rank - 1) % n, group=group)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        torch.cuda.synchronize(dev)
        expect("send/recv ring", recv, torch.full((1 << 18,), float((rank - 1) % n)))
    c.detail = "%s on %d GPU(s)" % (", ".join(done), n)
