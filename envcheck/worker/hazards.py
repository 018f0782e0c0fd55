"""Turn environment hazards hidden in exception messages into advice a user can act on.

Each entry is (substring of the message, advice); advice may be a function of nothing
that looks at the environment to say more. Only hazards of the *environment* go here;
what a probe knows about its own check it says with ``c.advice``.
"""

import importlib.metadata
import importlib.util
import os
import re


def numpy_version():
    """(importable, version) of the numpy this interpreter would import, without importing
    it: the dist-info can belong to another numpy than the one first on sys.path."""
    spec = importlib.util.find_spec("numpy")
    if spec is None:
        return False, None
    if spec.origin:
        try:
            with open(os.path.join(os.path.dirname(spec.origin), "version.py"),
                      encoding="utf-8") as f:
                m = re.search(r"""^version(?:: str)? = ["']([^"']+)["']""", f.read(), re.M)
            if m:
                return True, m.group(1)
        except OSError:
            pass
    try:
        return True, importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        return True, None


def pip_install(what):
    """The pip command for *this* interpreter (the one the ranks run, which under
    ``envcheck run --python`` is not envcheck's): a bare ``pip`` would install into
    whichever environment is active in the user's shell."""
    import shlex
    import sys

    return "%s -m pip install %s" % (shlex.quote(sys.executable or "python3"), what)


def numpy_missing():
    return "numpy is not installed in this environment: %s" % pip_install("numpy")


def numpy_advice():
    """"Numpy is not available" means numpy is missing, or this torch cannot use it."""
    importable, version = numpy_version()
    if not importable:
        return ("numpy is not installed in this environment, and torch needs it for this "
                "(all_gather_object, torch.distributed.checkpoint): %s"
                % pip_install("numpy"))
    major = version.split(".")[0] if version else ""
    if not major.isdigit() or int(major) >= 2:
        # torch 2.1.2 with numpy 2.x prints "Failed to initialize NumPy: _ARRAY_API not
        # found" at import, then raises "Numpy is not available" (observed).
        return ("numpy %s is installed but this torch cannot use it: a torch built against "
                "NumPy 1.x does not load NumPy 2 (torch printed 'Failed to initialize "
                "NumPy' at import): %s, or a torch built for NumPy 2"
                % (version or "(version unknown)", pip_install("'numpy<2'")))
    return ("numpy %s is installed but this torch cannot use it: run python -c 'import "
            "numpy' in this interpreter to see why, and reinstall numpy" % version)


def _installed(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def extension_advice():
    """torchvision (or torchaudio) built for another torch than the one installed: its
    C++ operators do not register, and the first use says 'operator torchvision::nms
    does not exist' (seen with PyPI's torchvision beside a CPU build of torch)."""
    torch_version = _installed("torch") or "?"
    found = ["%s %s" % (n, v) for n in ("torchvision", "torchaudio")
             for v in [_installed(n)] if v]
    release, _, variant = torch_version.partition("+")
    where = ("--index-url https://download.pytorch.org/whl/%s" % variant if variant
             else "(both from PyPI)")
    return ("%s does not match torch %s: an extension built for another torch release or "
            "variant (CUDA vs CPU) cannot register its operators. Install the pair from one "
            "index: pip install torch==%s torchvision %s" % (
                " and ".join(found) or "a torch extension", torch_version, release, where))


# Less free than this where a probe writes, and a failure there is the space's fault:
# torch does not always say ENOSPC (a short write of torch.save is "unexpected pos").
FULL_BYTES = 1 << 20
_NO_SPACE = ("No space left on device", "Disk quota exceeded")


def _free(path):
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def out_of_space(text):
    """Where the probe writes is full (or the error says so): 'TMPDIR=/x has 0 MiB
    free', else None."""
    where = []
    for name in ("TMPDIR", "ENVCHECK_CHECKPOINT_DIR"):
        path = os.environ.get(name)
        free = _free(path) if path else None
        if free is not None and (free < FULL_BYTES or any(n in text for n in _NO_SPACE)):
            where.append("%s=%s has %d MiB free" % (name, path, free >> 20))
    if not where and any(n in text for n in _NO_SPACE):
        where.append("no space left on device")
    return "; ".join(where) or None


def space_advice(where):
    return ("the filesystem is full, not the code under test: %s; free space there, or "
            "point TMPDIR (and ENVCHECK_CHECKPOINT_DIR for DCP) at a filesystem with room"
            % where)


_KNOWN = (
    ("Numpy is not available", numpy_advice),
    ("operator torchvision::", extension_advice),
    ("operator torchaudio::", extension_advice),
    ("_ARRAY_API not found", numpy_advice),
    ("No module named 'numpy'", numpy_missing),
    ("cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object",
     "a process group cannot be pickled or deep-copied: keep communication objects "
     "out of modules you copy or save (build the copy fresh and load_state_dict)"),
    # torch 1.13's torch.distributed._shard (sharded tensors, its checkpointing, FSDP's
    # state dicts) uses dataclass defaults that Python 3.11 rejects (observed).
    ("is not allowed: use default_factory",
     "this torch predates Python 3.11's dataclass rules (torch 1.13 on Python 3.11): "
     "its torch.distributed._shard modules do not import; use Python 3.10 with this "
     "torch, or torch 2.0 or later"),
    ("Address already in use",
     "the rendezvous port is taken: pick another MASTER_PORT"),
    ("NCCL error",
     "NCCL failed: rerun with NCCL_DEBUG=INFO to see which transport or device broke"),
)


# Hazards of the environment itself: their advice beats what a probe would say about
# its own check (a model that does not load because torchvision does not match torch is
# fixed by reinstalling, not by changing the model).
_ENVIRONMENT = ("Numpy is not available", "_ARRAY_API not found", "No module named 'numpy'",
                "operator torchvision::", "operator torchaudio::",
                "is not allowed: use default_factory")


def advice_for(exc, environment_only=False):
    text = "%s: %s" % (type(exc).__name__, exc)
    full = out_of_space(text)
    if full:
        return space_advice(full)
    for needle, advice in _KNOWN:
        if needle in text and (not environment_only or needle in _ENVIRONMENT):
            return advice() if callable(advice) else advice
    return None
