"""Checkpoint files: where probes write them, how they are compared and what they hold.

Every checkpoint a probe writes lives in a 0700 directory that is removed when the probe
leaves it. A rank killed by the supervisor (hang, crash) cannot clean up after itself, so
directories are named ``envcheck-ckpt-HOST-PID-*`` and the next run on that host removes
those whose process is gone.
"""

import collections
import contextlib
import os
import pickletools
import re
import shutil
import socket
import tempfile
import warnings
import zipfile

from ...launch import contain

PREFIX = "envcheck-ckpt-"
# DCP writes its files from every rank into one directory; on several hosts that needs a
# shared filesystem, which only the user can name.
SHARED_DIR_ENV = "ENVCHECK_CHECKPOINT_DIR"


def _host():
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:40]


def own_prefix():
    return "%s%s-%d-" % (PREFIX, _host(), os.getpid())


def sweep_stale(base):
    """Remove this user's checkpoint dirs on this host whose process has died."""
    return contain.sweep_dead(
        base, re.compile(r"^%s%s-(\d+)-" % (re.escape(PREFIX), re.escape(_host()))))


class DirProblem(collections.namedtuple("DirProblem", "unshared fail message advice")):
    """Why DCP cannot be tested across these ranks. ``unshared``: the directory is not
    shared between the hosts, and training would fail the same way; ``fail`` on the ranks
    that cannot see rank 0's files (the others skip and point at them). Otherwise
    nothing to test on: a skip."""


SHARED_ADVICE = ("put checkpoints on a directory every host mounts (NFS, Lustre, GPFS, a "
                 "shared volume) and point DCP at it (checkpoint_id=, TorchTitan's "
                 "checkpoint.folder); test it here with --checkpoint-dir DIR or %s=DIR"
                 % SHARED_DIR_ENV)


def dir_problem(given, base, blind, hosts, rank):
    """What the DCP checks must say about this directory on ``rank`` (None: test it)."""
    names = list(dict.fromkeys(hosts))
    if len(names) > 1 and not given:
        return DirProblem(False, False, (
            "DCP across hosts not tested: the ranks are on %d hosts (%s) and no directory "
            "every host mounts was given; to test it: --checkpoint-dir DIR or %s=DIR, on "
            "the filesystem training saves to" % (len(names), ", ".join(names),
                                                  SHARED_DIR_ENV)), None)
    if blind:
        if rank not in blind:
            return DirProblem(True, False, "DCP not run: ranks on other hosts cannot see "
                              "%s (see the ranks that failed)" % base, None)
        return DirProblem(True, True, (
            "cannot see rank 0's files in %s (made on %s): the directory is not shared "
            "between %s, so torch.distributed.checkpoint.load fails here as in training "
            "(no .metadata: rank 0 writes it on %s only)" % (
                base, hosts[0], " and ".join(names), hosts[0])), SHARED_ADVICE)
    return None


@contextlib.contextmanager
def shared_dir(ctx):
    """One 0700 directory for all ranks: made by rank 0, its path sent to every rank,
    removed by rank 0 after every rank is done with it.

    Yields ``(path, problem)``: a ``DirProblem`` when ranks on other hosts cannot see it
    (it is not shared) or when no shared directory was given for ranks on several hosts.
    """
    import torch.distributed as dist

    from ...worker.gather import all_gather_ints, all_gather_strings

    given = os.environ.get(SHARED_DIR_ENV)
    base = given or tempfile.gettempdir()
    path, error = "", ""
    if ctx.rank == 0:
        try:
            sweep_stale(base)
            path = tempfile.mkdtemp(prefix=own_prefix(), dir=base)
            os.chmod(path, 0o700)
        except OSError as exc:
            error = "cannot create a directory in %s: %s" % (base, exc)
        if len(path.encode("utf-8")) > 255:
            shutil.rmtree(path, ignore_errors=True)
            path, error = "", "%s is too long a path (255 bytes at most)" % base
    # The path travels as a tensor of bytes: all_gather_object would need numpy.
    path, error = all_gather_strings(ctx, path)[0], all_gather_strings(ctx, error)[0]
    if error:
        raise OSError(error)
    seen = all_gather_ints(ctx, [1 if os.path.isdir(path) else 0])
    hosts = all_gather_strings(ctx, ctx.host)
    blind = [r for r, (ok,) in enumerate(seen) if not ok]
    try:
        yield path, dir_problem(given, base, blind, hosts, ctx.rank)
    finally:
        dist.barrier()
        if ctx.rank == 0:
            shutil.rmtree(path, ignore_errors=True)


def diff_state(a, b, torch, where=""):
    """Paths where two (nested) state dicts differ, tensors compared bit for bit."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return [] if same_bits(a, b, torch) else [where or "<tensor>"]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return ["%s{keys %s}" % (where, sorted(map(str, set(a) ^ set(b)))[:4])]
        out = []
        for k in a:
            out += diff_state(a[k], b[k], torch, "%s.%s" % (where, k) if where else str(k))
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return ["%s[len]" % where]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff_state(x, y, torch, "%s[%d]" % (where, i))
        return out
    # repr: NaN != NaN, but a NaN learning rate read back as NaN is a faithful copy.
    return [] if type(a) is type(b) and repr(a) == repr(b) else [where or "<value>"]


def same_bits(a, b, torch):
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    a = a.detach().cpu().contiguous().reshape(-1)
    b = b.detach().cpu().contiguous().reshape(-1)
    if a.dtype == torch.bool or a.element_size() == 1:
        return torch.equal(a, b)
    # Bytes, not values: -0.0 == 0.0 and NaN != NaN would hide or invent differences.
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def pickle_globals(path):
    """``module.name`` of every class or function a checkpoint's pickle refers to.

    Reads the pickle opcodes (pickletools), never unpickles: torch.save zip files
    (``*/data.pkl``) and plain pickles such as DCP's ``.metadata``.
    """
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith("data.pkl")]
            data = z.read(names[0]) if names else b""
    else:
        with open(path, "rb") as f:
            data = f.read()
    # Not a real stack machine: STACK_GLOBAL follows the two strings it names (pushed
    # or fetched from the memo), and that is all this needs to track.
    found, recent, memo = set(), [None, None], {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name == "GLOBAL":
            found.add(arg.replace(" ", "."))
        elif name == "STACK_GLOBAL" and isinstance(recent[-2], str) \
                and isinstance(recent[-1], str):
            found.add("%s.%s" % (recent[-2], recent[-1]))
        if name == "MEMOIZE":
            memo[len(memo)] = recent[-1]
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = recent[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            recent.append(memo.get(arg))
        else:
            text = isinstance(arg, str) and ("STRING" in name or "UNICODE" in name)
            recent.append(arg if text else None)
        del recent[:-2]
    return sorted(found)


_GROUP_WORDS = ("ProcessGroup", "_distributed_c10d", "DeviceMesh", "c10d.Store", "Work")


def group_globals(names):
    """The globals among ``names`` that are communication objects."""
    return [n for n in names if any(w in n for w in _GROUP_WORDS)]


def quiet_load(torch, path, **kwargs):
    # torch 2.4/2.5 warn on every default load; that warning is default_load's subject.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(path, **kwargs)
