"""The forked side of a zygote: become what the request names, then leave.

A zygote (``worker/zygote.py`` for ``envcheck run``, ``worker/hostzygote.py`` for a
host under torchrun) imports torch once and forks a process per rank. The request names
what the fork runs by ``"module:function"`` (``resolve``), and passes what the rank
needs to know of its making (the zygote's pid, how long torch took to import) as an
argument: nothing is patched into a module after the fork, and the zygote imports
nothing of what its forks run.

stdlib only.
"""

import importlib
import os
import sys
import traceback
from typing import Any, Callable, NoReturn, Optional

# Targets are envcheck's own: a request cannot name another package's function.
PACKAGE = "envcheck."


def resolve(target: str) -> Callable[..., Any]:
    """The function ``"package.module:function"`` names; ValueError for another shape,
    or a module outside envcheck."""
    module, sep, name = target.partition(":")
    if not sep or not name or not module.startswith(PACKAGE):
        raise ValueError("not a target of envcheck's: %r" % target)
    return getattr(importlib.import_module(module), name)


def run_forked(become: Callable[[], Optional[int]]) -> NoReturn:
    """In a forked process: ``become()`` (the rank; its return value, or SystemExit's
    code, is the exit code), then leave without Python's teardown; never returns."""
    code = 1
    try:
        code = become() or 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write("%s\n" % exc.code)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
