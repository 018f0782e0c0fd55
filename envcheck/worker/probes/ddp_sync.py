"""ddp-sync: when ranks disagree about the model, does DDP fail fast instead of hanging?

Real failure: a Lightning Fabric user's two ranks froze in DistributedDataParallel's
``_verify_params_across_processes`` because ``fabric.launch()`` sat in a trainer's
``__init__`` and the ranks fell out of step. DDP is supposed to compare parameter counts
and shapes across ranks at construction and raise on every rank; these checks build DDP
on deliberately mismatched models and measure how long that takes and what it says. Each
mismatch runs on its own gloo subgroup with a short timeout, so a rank that misses the
mismatch is reported in seconds instead of hanging the probe. A DDP that *accepts* mismatched
models is a failure: training would diverge silently or hang at the first backward.

Which ranks detect a shape mismatch depends on the world size, so the verdict is the
job's, not a rank's: at 2 ranks rank 0 waits in ``_sync_params_and_buffers`` until the
timeout; at 3 and 4, some ranks wait and the others go on as if nothing were wrong (which
ones follows gloo's broadcast tree; seen with torch 2.13). Either way DDP did not fail
fast on every rank.

No idle waiting: a rank whose DDP raised *leaves* the subgroup — it shuts its
connections down, as a rank that exits on the error would — so a peer blocked on it in
DDP's collectives fails at once with gloo's "Connection closed by peer". (The store all
ranks share cannot release it: a rank blocked inside a C++ collective reads no key, and
gloo's ``abort()`` does not wake a pending send.) It does not leave the instant it
raised: a peer released that way drops what it still had to send (at 3 ranks rank 0,
blocked sending to rank 2, drops its broadcast to rank 1), so ranks in step must finish
first. Every rank says what it saw in that store as soon as it knows; the rank that
raised leaves once every other rank has said so, or after ``SETTLE_S`` (ranks in step
finish in milliseconds; a rank that says nothing is blocked). At 2 ranks it leaves at
once: its one peer has no third rank to lose a message to, and cannot finish a
collective of the subgroup without it. A released rank does not
leave in turn, for the same reason. The subgroup's short timeout remains the backstop
for a rank that is not released (a wait on a rank that did not raise, or a platform
without /proc). The words say what such a rank does with DDP left alone ("blocked waiting for it (with
no timeout, a hang)"), never a duration: ``data`` says how long it really waited and
that a peer leaving released it.
"""

import datetime
import os
import socket
import stat
import time
import traceback

# The checks this probe reports, in the order it runs them (``envcheck probes --checks``,
# the matrix validation and the ranks read this; a check not declared here is an error).
CHECKS = (
    "mismatched_shapes",
    "extra_parameter",
    "barrier_after_setup",
)

# Imported in the background while the rank waits at the rendezvous (worker/runtime):
# DDP's first construction imports torch._dynamo (seconds).
PRELOAD = ("torch._dynamo",)

# How long a rank whose DDP raised waits for its peers to say what they saw before it
# leaves (see the module docstring): ranks in step finish in milliseconds.
SETTLE_S = 0.5

# The short timeout of the subgroup each mismatch runs on: past it, a rank that did not
# detect the mismatch stops waiting in DDP's collectives. Detection itself is one
# allgather or broadcast of parameter metadata: milliseconds when ranks are in step.
FAIL_FAST_S = 3.0


def _where(exc):
    """The innermost torch function the rank was in when it gave up."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "torch" in f.filename]
    return frames[-1].name if frames else "DDP's constructor"


def _is_timeout(exc):
    """Did the subgroup's timeout end DDP's wait, rather than DDP raising on its own?

    Told by the error, never by how long it took: under load a real DDP error can be
    slow, and a slow error is still DDP detecting the mismatch.
    """
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text


# gloo's words when a peer of a pending send or receive shut its connection down.
_PEER_LEFT = ("connection closed by peer", "connection reset by peer", "broken pipe")


def _peer_left(exc):
    """Did a peer leaving the subgroup end DDP's wait (see the module docstring)?"""
    text = str(exc).lower()
    return any(words in text for words in _PEER_LEFT)


def _tcp_sockets():
    """The file descriptors of this process's TCP sockets now (empty without /proc)."""
    found = set()
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        try:
            if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                found.add(int(name))
        except (OSError, ValueError):
            continue
    return found


def _store():
    """The store every rank of the job shares (the default group's), or None."""
    import torch.distributed as dist

    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:  # private API: without it, ranks only settle for SETTLE_S
        return None


def _say(store, key, rank, seen):
    if store is not None:
        try:
            store.set(key + str(rank), seen)
        except Exception:
            pass


def _settle(store, key, ctx):
    """Until every other rank said what it saw, at most SETTLE_S."""
    others = [key + str(r) for r in range(ctx.world_size) if r != ctx.rank]
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        try:
            if store is not None and store.check(others):
                return
        except Exception:
            store = None
        time.sleep(0.005)


def _leave(fds):
    """Shut down this rank's connections of the subgroup (``fds``: the sockets its
    creation opened), so that peers blocked on this rank in a collective fail at once.

    The listening socket is left alone (gloo's accept loop treats a shut-down listener
    as fatal) and so is anything that is not a TCP stream. The descriptors stay gloo's:
    a duplicate is shut down and closed, which ends the connection for both."""
    for fd in fds:
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) \
                    and sock.type == socket.SOCK_STREAM \
                    and not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()


def _warm_up():
    """DDP's first construction imports torch._dynamo (seconds per rank). Import it
    before the short timeout starts counting, so a slow import never looks like a hang."""
    try:
        import torch._dynamo  # noqa: F401
    except Exception:  # older torch has none; an import error here is not ours to judge
        pass


def _ranks(ranks):
    return ",".join(map(str, ranks))


def _fresh_group(ctx):
    """A gloo subgroup of every rank with the short timeout, and the sockets it opened.

    Made before the check starts counting, so the check's time is DDP's: a rank that
    detected the previous mismatch raced ahead, and meets the others here first on the
    default group (long timeout)."""
    import torch.distributed as dist

    dist.barrier()
    before = _tcp_sockets()
    group = dist.new_group(ranks=list(range(ctx.world_size)), backend="gloo",
                           timeout=datetime.timedelta(seconds=FAIL_FAST_S))
    dist.barrier(group=group)  # every connection of the subgroup is up
    return group, _tcp_sockets() - before


def _mismatch(ctx, c, group, build_local_model, what):
    """Build DDP on a model that differs across ranks, then judge the job as a whole.

    The mismatch runs on a gloo subgroup with a short timeout: a rank that does not
    detect it blocks in a collective until a rank it waits on leaves (see the module
    docstring), or the timeout ends that would-be hang. Then every rank learns what every
    other rank saw, so all ranks report the same words whatever the world size: DDP
    raised on every rank (it fails fast), or only on some while the others waited or
    went on (the Lightning Fabric hang).
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ..context import is_stop
    from ..gather import all_gather_strings

    if ctx.world_size < 2:
        c.skip("needs 2 ranks that disagree about the model, found 1")
    group, sockets = group
    store, key = _store(), "envcheck/ddp-sync/%s/" % c.name
    model = build_local_model()  # CPU: DDP's verification does not depend on the device
    t0 = time.monotonic()
    seen = "went_on"
    try:
        DDP(model, process_group=group)
        _say(store, key, ctx.rank, seen)
    except BaseException as exc:  # a BaseException from torch too: peers must be released
        if is_stop(exc):
            raise
        seconds = time.monotonic() - t0
        text = str(exc).strip()
        released = not _is_timeout(exc) and _peer_left(exc)
        seen = "waited" if released or _is_timeout(exc) else "raised"
        _say(store, key, ctx.rank, seen)
        if seen == "raised":
            # Out of DDP's collectives for good: a peer still waiting on this rank must
            # not sit out the timeout, once the peers in step are done. With one peer
            # there is no third rank whose messages a released peer could drop, and every
            # collective it is in needs this rank: leave at once.
            if ctx.world_size > 2:
                _settle(store, key, ctx)
            _leave(sockets)
        c.data = {"seconds_to_failure": seconds, "error_type": type(exc).__name__,
                  "message": text[:2000], "where": _where(exc)}
        if released:
            c.data["released_by_peer_leaving"] = True
        first = (text.splitlines()[0] if text else type(exc).__name__)[:120]
    everyone = all_gather_strings(ctx, seen)
    by_kind = {k: [r for r, s in enumerate(everyone) if s == k]
               for k in ("raised", "waited", "went_on")}
    c.data["ranks"] = by_kind
    if len(by_kind["raised"]) == ctx.world_size:
        c.detail = "raised on all %d ranks, here in %.2f s: %s" % (
            ctx.world_size, c.data["seconds_to_failure"], first)
        return
    others = []
    if by_kind["waited"]:
        # Blocked in DDP's setup: released by envcheck (or, failing that, by the short
        # timeout); never a claim about how long it waited (``data`` has the seconds).
        others.append("rank(s) %s blocked waiting for it (with no timeout, a hang)"
                      % _ranks(by_kind["waited"]))
    if by_kind["went_on"]:
        others.append("rank(s) %s went on with no error" % _ranks(by_kind["went_on"]))
    if not by_kind["raised"]:
        c.fail("DDP raised on no rank although %s: %s" % (what, "; ".join(others)),
               advice="make every rank build the same model before wrapping it in DDP; "
                      "a mismatch that DDP accepts diverges silently or hangs in backward")
    c.fail("DDP raised only on rank(s) %s of %d although %s; %s"
           % (_ranks(by_kind["raised"]), ctx.world_size, what, "; ".join(others)),
           advice="DDP only detects this mismatch on some ranks; with the default timeout "
                  "the others hang, as in the Lightning Fabric report: make every rank "
                  "build the same model, set timeout= in init_process_group, and debug with "
                  "TORCH_DISTRIBUTED_DEBUG=DETAIL")


def probe_ddp_sync(ctx):
    """DDP on mismatched models fails fast with a clear error; all ranks reach a barrier after setup"""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    last = ctx.world_size - 1
    _warm_up()

    group = _fresh_group(ctx) if ctx.world_size > 1 else None
    with ctx.check("mismatched_shapes") as c:
        _mismatch(ctx, c, group, lambda: torch.nn.Linear(8, 8 if ctx.rank != last else 9),
                  "rank %d has a parameter of another shape" % last)

    def build():
        layers = [torch.nn.Linear(8, 8)]
        if ctx.rank == last:
            layers.append(torch.nn.Linear(8, 8))
        return torch.nn.Sequential(*layers)

    group = _fresh_group(ctx) if ctx.world_size > 1 else None
    with ctx.check("extra_parameter") as c:
        _mismatch(ctx, c, group, build, "rank %d has an extra parameter" % last)

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
