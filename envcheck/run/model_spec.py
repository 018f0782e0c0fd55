"""``--model MODULE:FACTORY`` or ``--model path/to/file.py:FACTORY``, checked up front.

Only the form is checked here (the supervisor cannot import the user's model: that would
import torch). The ranks import it and report problems as failed checks.
"""

import os
import re

from ..core.errors import UsageError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_model_spec(spec):
    target, sep, factory = spec.rpartition(":")
    if not sep or not target or not _IDENT.match(factory):
        raise UsageError("--model %r: expected MODULE:FACTORY or path/to/file.py:FACTORY, "
                         "e.g. mypkg.models:build_model" % spec)
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise UsageError("--model %r: no such file %s" % (spec, target))
        return {"path": path, "factory": factory, "spec": spec}
    if not all(_IDENT.match(part) for part in target.split(".")):
        raise UsageError("--model %r: %r is not a module name" % (spec, target))
    return {"module": target, "factory": factory, "spec": spec}
