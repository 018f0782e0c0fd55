"""The interpreter the ranks run under: this one, or ``--python PATH``.

Checked before any rank starts, without importing torch there (find_spec only), so a
wrong path or a venv without torch is a one-line error, not a crash of every rank.
"""

import dataclasses
import importlib.util
import json
import os
import platform
import shutil
import sys

from ..core.errors import UsageError
from ..launch import procs

_PROBE = (
    "import importlib.util, json, platform, sys\n"
    "spec = importlib.util.find_spec('torch')\n"
    "print('\\n%s' + json.dumps({'python': platform.python_version(),"
    " 'executable': sys.executable, 'torch': spec.origin if spec else None}))\n"
) % "envcheck-interpreter: "
_ANSWER = "envcheck-interpreter: "


def _answer(stdout):
    """The probe's answer among whatever a wrapper printed around it (a banner, a module
    system's notice): the last line it marked, parsed strictly; None if there is none."""
    for line in reversed(stdout.splitlines()):
        if not line.startswith(_ANSWER):
            continue
        try:
            info = json.loads(line[len(_ANSWER):])
        except ValueError:
            return None
        ok = isinstance(info, dict) and isinstance(info.get("python"), str) \
            and isinstance(info.get("torch"), (str, type(None)))
        return info if ok else None
    return None


@dataclasses.dataclass(frozen=True)
class Interpreter:
    path: str
    python_version: str
    torch_location: str


def install_hint(path, python_version=None):
    """The pinned install of the build ``envcheck check --suggest`` picks for this node
    (an open `pip install torch` takes the newest CUDA build: gigabytes on a CPU node)."""
    pick = None
    try:
        from ..preinstall import checker as command

        series = ".".join((python_version or platform.python_version()).split(".")[:2])
        found = command.run(suggest=True, python_version=series).suggestions
        pick = found[0].build.pip if found else None
    except Exception:  # noqa: BLE001 - no answer from the matrix: the general advice
        pass
    if pick:
        return ("install the newest torch that works on this node with: %s -m %s, then "
                "%s -m pip install numpy ('envcheck check --suggest' lists others)"
                % (path, pick, path))
    return ("install a pinned torch ('envcheck check --suggest' names the build for this "
            "node): %s -m pip install torch==VERSION numpy" % path)


def resolve(python=None):
    if python is None:
        # The ranks run under this very interpreter: ask it directly, no subprocess.
        spec = importlib.util.find_spec("torch")
        if spec is None:
            raise UsageError("torch is not installed for %s (Python %s); %s"
                             % (sys.executable, platform.python_version(),
                                install_hint(sys.executable, platform.python_version())))
        return Interpreter(sys.executable, platform.python_version(), spec.origin)
    path = python
    if os.sep not in python and not os.path.exists(python):
        path = shutil.which(python)
        if path is None:
            raise UsageError("--python %s: not found on PATH" % python)
    if not os.path.exists(path):
        raise UsageError("--python %s: no such file" % python)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise UsageError("--python %s: not an executable file (give the interpreter, "
                         "e.g. /path/to/venv/bin/python)" % python)
    try:
        proc = procs.run([path, "-c", _PROBE], capture_output=True, text=True,
                              timeout=60)
    except (OSError, procs.TimeoutExpired) as exc:
        raise UsageError("--python %s: cannot run it (%s)" % (path, exc)) from None
    info = _answer(proc.stdout)
    if info is None:
        raise UsageError("%s does not behave like a Python 3 interpreter (exit %d)"
                         % (path, proc.returncode))
    if not info["torch"]:
        raise UsageError("torch is not installed for %s (Python %s); %s"
                         % (path, info["python"], install_hint(path, info["python"])))
    return Interpreter(path, info["python"], info["torch"])
