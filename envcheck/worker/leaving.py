"""DDP's setup on a gloo subgroup that a rank can leave, so that a rank's error never
leaves its peers waiting in a collective of envcheck's own making.

When ranks disagree about the model, DDP raises on some ranks and leaves the others
blocked in its setup collectives. In a training script the rank that raised exits, its
connections close, and the blocked peers fail within a second or two with gloo's
"Connection closed by peer" (observed with Lightning Fabric 2.6.6 and plain DDP, torch
2.13.0). A probe cannot exit: it records the error and goes on to its next collective,
where the blocked peer can never meet it, and the run ends in a hang of envcheck's own
making, blamed on the rank that only waited. So a setup that may disagree runs here:

- on a fresh gloo subgroup with a short timeout, made before the setup starts counting;
- a rank whose setup raised *leaves* the subgroup: it shuts its connections down, as a
  rank that exits on the error would, so a peer blocked on it fails at once. (The store
  all ranks share cannot release it: a rank blocked inside a C++ collective reads no
  key, and gloo's ``abort()`` does not wake a pending send.)
- It does not leave the instant it raised: a peer released that way drops what it still
  had to send (at 3 ranks rank 0, blocked sending to rank 2, drops its broadcast to rank
  1), so ranks in step must finish first. Every rank says what it saw in the store as
  soon as it knows; the rank that raised leaves once every other rank has said so or is
  blocked in the setup (inside it for ``BLOCKED_S`` without a word), or after
  ``SETTLE_S``. At 2 ranks it leaves at once: its one peer has no third rank to
  lose a message to. A released rank does not leave in turn, for the same reason.
- Then every rank learns what every other rank saw (``Tried.everyone``) on the default
  group, which every rank reaches: the verdict is the job's, the same on every rank.

The subgroup's short timeout is the backstop for a rank that is not released (a wait on a
rank that did not raise, or a platform without /proc).
"""

import datetime
import os
import socket
import stat
import time
import traceback

# How long a rank whose setup raised waits for its peers to say what they saw before it
# leaves: ranks in step finish in milliseconds.
SETTLE_S = 0.5
# A peer inside the setup that has not said what it saw for this long, as this rank
# watched it, is blocked there (see _settle).
BLOCKED_S = 0.1

# The short timeout of the subgroup: past it, a rank that did not detect the
# disagreement stops waiting. Detection itself is one allgather or broadcast of
# parameter metadata: milliseconds when ranks are in step.
FAIL_FAST_S = 3.0

# gloo's words when a peer of a pending send or receive shut its connection down.
_PEER_LEFT = ("connection closed by peer", "connection reset by peer", "broken pipe")


def where(exc):
    """The innermost torch function the rank was in when it gave up."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "torch" in f.filename]
    return frames[-1].name if frames else "DDP's constructor"


def is_timeout(exc):
    """Did the subgroup's timeout end the wait, rather than the setup raising on its own?

    Told by the error, never by how long it took: under load a real DDP error can be
    slow, and a slow error is still DDP detecting the mismatch.
    """
    text = str(exc).lower()
    return "timed out" in text or "timeout" in text


def peer_left(exc):
    """Did a peer leaving the subgroup end the wait?"""
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
    """Until every other rank said what it saw, or is blocked in the setup: it entered
    the setup (``key + "in/R"``, said before it) and has not come out of it for BLOCKED_S
    since this rank saw it there. Ranks in step raise within milliseconds of each other,
    and a blocked rank says nothing until it is released, so waiting for it would always
    cost the whole SETTLE_S. At most SETTLE_S (a rank that never entered, say)."""
    others = [r for r in range(ctx.world_size) if r != ctx.rank]
    now = time.monotonic()
    deadline, inside = now + SETTLE_S, {}
    while now < deadline and store is not None:
        try:
            waiting = [r for r in others if not store.check([key + str(r)])]
            for r in waiting:
                if r not in inside and store.check([key + "in/" + str(r)]):
                    inside[r] = now
            if all(r in inside and now - inside[r] >= BLOCKED_S for r in waiting):
                return
        except Exception:
            store = None
        time.sleep(0.005)
        now = time.monotonic()
    while now < deadline:  # no store: only the time
        time.sleep(0.005)
        now = time.monotonic()


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


def fresh_group(ctx, timeout_s=FAIL_FAST_S):
    """A gloo subgroup of every rank with a short timeout, and the sockets it opened.

    Made before a check starts counting, so the check's time is the setup's: a rank that
    raised in the previous check raced ahead, and meets the others here first on the
    default group (long timeout)."""
    import torch.distributed as dist

    dist.barrier()
    before = _tcp_sockets()
    group = dist.new_group(ranks=list(range(ctx.world_size)), backend="gloo",
                           timeout=datetime.timedelta(seconds=timeout_s))
    dist.barrier(group=group)  # every connection of the subgroup is up
    return group, _tcp_sockets() - before


class Tried:
    """What a setup did on this rank and on every rank of the job.

    ``seen``: "raised" (the setup raised on its own), "waited" (blocked until a peer
    left, or until the subgroup's timeout), "went_on" (no error); ``error`` this rank's
    exception or None; ``data`` its figures for the check's JSON; ``everyone`` each
    rank's ``seen``; ``first_lines`` each rank's first error line ("" where none);
    ``by_kind`` {seen: [ranks]}."""

    def __init__(self, seen, error, data, everyone, first_lines):
        self.seen, self.error, self.data = seen, error, data
        self.everyone, self.first_lines = everyone, first_lines
        self.by_kind = {k: [r for r, s in enumerate(everyone) if s == k]
                        for k in ("raised", "waited", "went_on")}

    def first_raised(self):
        """(rank, first line) of the lowest rank whose setup raised on its own."""
        for r in self.by_kind["raised"]:
            return r, self.first_lines[r]
        return None, ""


def try_setup(ctx, group, key, setup):
    """Run ``setup(process_group)`` on ``group`` (from ``fresh_group``) in every rank; a
    rank where it raised leaves the subgroup (see the module docstring). Returns a
    ``Tried``; never raises what the setup raised (but a stop: Ctrl-C, the supervisor)."""
    from .context import is_stop
    from .gather import all_gather_strings

    group, sockets = group
    store = _store()
    t0 = time.monotonic()
    seen, error, data, first = "went_on", None, {}, ""
    _say(store, key + "in/", ctx.rank, "1")  # for a peer that raised: see _settle
    try:
        setup(group)
        _say(store, key, ctx.rank, seen)
    except BaseException as exc:  # a BaseException from torch too: peers must be released
        if is_stop(exc):
            raise
        error = exc
        seconds = time.monotonic() - t0
        text = str(exc).strip()
        released = not is_timeout(exc) and peer_left(exc)
        seen = "waited" if released or is_timeout(exc) else "raised"
        _say(store, key, ctx.rank, seen)
        if seen == "raised":
            # Out of the setup's collectives for good: a peer still waiting on this rank
            # must not sit out the timeout, once the peers in step are done. With one
            # peer there is no third rank whose messages a released peer could drop.
            if ctx.world_size > 2:
                _settle(store, key, ctx)
            _leave(sockets)
        data = {"seconds_to_failure": seconds, "error_type": type(exc).__name__,
                "message": text[:2000], "where": where(exc)}
        if released:
            data["released_by_peer_leaving"] = True
        first = (text.splitlines()[0] if text else type(exc).__name__)[:200]
    everyone = all_gather_strings(ctx, seen)
    lines = all_gather_strings(ctx, first)
    return Tried(seen, error, data, everyone, lines)


def ranks_text(ranks):
    return ",".join(map(str, ranks))


def shape_signature(model):
    """What DDP compares across ranks at construction, as one short string: the name,
    shape and dtype of every parameter and buffer."""
    import hashlib

    parts = ["%s:%s:%s" % (n, tuple(t.shape), t.dtype) for n, t in
             list(model.named_parameters()) + list(model.named_buffers())]
    return "%d/%s" % (len(parts), hashlib.sha1("|".join(parts).encode()).hexdigest()[:16])


def ranks_disagree(ctx, model):
    """True where the ranks' models differ in what DDP compares (a collective on the
    default group: every rank must call it)."""
    from .gather import all_gather_strings

    return len(set(all_gather_strings(ctx, shape_signature(model)))) > 1
