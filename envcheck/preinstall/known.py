"""What exists, for ``envcheck check``'s planning flags: a value no NVIDIA driver branch,
no GPU or no torch release has is the user's typo, not a node to judge.

``--driver 99999``, ``--gpu sm_999`` and ``--python-version 3.99`` are refused (one line,
exit 2) naming what was expected, from the matrix's own facts: the driver branches its
CUDA toolkits need (``cuda.toml``, NVIDIA's Table 3), the compute capabilities of its
GPU generations and toolkits (``gpus.toml``, ``cuda.toml``) and the Pythons its torch
releases have wheels for (``releases.toml``). A value the matrix does not know yet (a
driver branch newer than the newest toolkit's) is added with ``--matrix DIR``. Only what
the user typed is checked: what nvidia-smi reports on the node is a fact to judge.
"""

import re

from packaging.version import Version

from ..core.errors import UsageError
from ..matrix import versions
from ..matrix.versions import sm_tuple

OLDEST_BRANCH = 100  # every NVIDIA Linux driver branch since R100 has three digits


def newest_branch(matrix):
    """The newest driver branch the matrix knows: that of its newest toolkit's driver."""
    return max(versions.driver_tuple(t.min_driver)[0]
               for t in matrix.toolkits if t.min_driver)


def check_driver(matrix, text):
    """``--driver``: BRANCH[.MINOR[.PATCH]] with a branch NVIDIA has released."""
    newest = newest_branch(matrix)
    expected = ("give an NVIDIA Linux driver version like 535.104.05: a branch from R%d "
                "to R%d (CUDA %s's, the newest the matrix knows)"
                % (OLDEST_BRANCH, newest, _toolkit_of(matrix, newest)))
    try:
        parts = versions.driver_tuple(text)
    except ValueError:
        raise UsageError("--driver %r: %s" % (text, expected)) from None
    if len(parts) > 3:
        raise UsageError("--driver %r: NVIDIA driver versions have at most three parts; %s"
                         % (text, expected))
    if not OLDEST_BRANCH <= parts[0] <= newest:
        raise UsageError("--driver %r: no NVIDIA driver branch R%d; %s"
                         % (text, parts[0], expected))


def _toolkit_of(matrix, branch):
    return next(t.version for t in sorted(matrix.toolkits, key=lambda t: Version(t.version),
                                          reverse=True)
                if t.min_driver and versions.driver_tuple(t.min_driver)[0] == branch)


def capabilities(matrix):
    """Every compute capability a GPU generation or a CUDA toolkit of the matrix names."""
    archs = {a for g in matrix.node.generations for a in g.archs}
    archs |= {a for t in matrix.toolkits for a in t.archs}
    return sorted({_base(a) for a in archs}, key=sm_tuple)


def _base(sm):
    return re.sub(r"[af]$", "", sm)  # sm_90a, sm_100f: the arch-specific targets of sm_XY


def check_gpu(matrix, sm, text):
    """``--gpu sm_XY``: a compute capability some NVIDIA GPU has."""
    known = capabilities(matrix)
    if _base(sm) not in known:
        raise UsageError("--gpu %r: no NVIDIA GPU has compute capability %d.%d; give one "
                         "of %s, or a GPU name like \"NVIDIA B200\""
                         % (text, *sm_tuple(sm), " ".join(known)))


MACHINES = ("x86_64", "aarch64")


def machine_for(matrix, arch, gpus):
    """(machine, note): the CPU architecture to judge the wheel for. ``--arch``, else the
    one a Grace superchip named with --gpu implies (a GB200 node is aarch64, whatever
    machine plans for it), else None: this machine's. A --arch that no node with those
    GPUs has is bad input."""
    if arch is not None:
        arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(arch.strip().lower(),
                                                             arch.strip().lower())
        if arch not in MACHINES:
            raise UsageError("--arch %r: give x86_64 or aarch64 (a Grace node: GH200, "
                             "GB200, GB10), as uname -m prints it" % arch)
    for text in gpus:
        model = matrix.node.model_sm(text)[1] if re.search(r"[A-Za-z]\s*\d", text) \
            else None
        if model is None or not model.machine or model.machine == arch:
            continue
        if arch:
            raise UsageError("--gpu %r comes only on %s nodes, not --arch %s"
                             % (text, model.machine, arch))
        return model.machine, ("%s is a Grace superchip: judged for a Linux %s node"
                               % (text.strip(), model.machine))
    return arch, None


def pythons(matrix):
    """Every Python some torch release of the matrix has wheels for, free-threaded too."""
    found = {p for r in matrix.releases for p in r.python}
    found |= {p for r in matrix.releases for f in r.per_patch for p in f.python}
    return sorted(found, key=lambda p: (p.endswith("t"), Version(p.rstrip("t"))))


def check_python(matrix, series, text):
    """``--python-version``: a Python some torch release has wheels for."""
    known = pythons(matrix)
    if series not in known:
        series_known = sorted((r.series for r in matrix.releases), key=Version)
        first, last = series_known[0], series_known[-1]
        raise UsageError("--python-version %r: no torch release (%s to %s) has wheels for "
                         "Python %s; give one of %s" % (text, first, last, series,
                                                         " ".join(known)))
