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


def check_model_found(model, own_python=True):
    """A typo in ``--model`` fails at once, not after the whole suite: the module is
    looked up as the ranks will import it (the cwd first, then this Python's path) and
    the factory among the names the file binds at top level, both without running any of
    it (the supervisor never imports torch). With ``--python`` another interpreter's
    path decides: only a file is checked there."""
    import ast
    import difflib
    import importlib.machinery

    spec = model["spec"]
    origin = model.get("path")
    if origin is None:
        if not own_python:
            return
        import sys

        where = [os.getcwd()] + [p for p in sys.path if p]
        found = None
        parts = model["module"].split(".")
        for i, part in enumerate(parts):
            found = importlib.machinery.PathFinder.find_spec(part, where)
            if found is None:
                raise UsageError("--model %r: no module named %r (looked in %s and this "
                                 "Python's path)" % (spec, ".".join(parts[:i + 1]),
                                                     os.getcwd()))
            where = list(found.submodule_search_locations or [])
        origin = found.origin
    if not origin or not origin.endswith(".py"):
        return  # compiled, or a namespace package: the ranks will say
    try:
        with open(origin, "rb") as f:
            tree = ast.parse(f.read(), origin)
    except (OSError, SyntaxError, ValueError):
        return  # the ranks report it, with the user's traceback
    bound = set()

    def bind(statements):
        """Names the statements bind at module level; False where it cannot tell."""
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        return False  # whatever it brings in
                    bound.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                inner = list(getattr(node, "body", [])) + list(getattr(node, "orelse", [])) + \
                    list(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    inner += handler.body
                if bind(inner) is False:
                    return False
            elif isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant):
                # globals().update(...), setattr(sys.modules[...]): it cannot tell
                if "globals" in ast.dump(node) or "setattr" in ast.dump(node):
                    return False
        return True

    if bind(tree.body) is False:
        return
    if "__getattr__" in bound or model["factory"] in bound:
        return
    close = difflib.get_close_matches(model["factory"], sorted(bound), n=1)
    raise UsageError("--model %r: %s has no top-level %r%s" % (
        spec, os.path.relpath(origin) if not os.path.relpath(origin).startswith("..")
        else origin, model["factory"], "; did you mean %r?" % close[0] if close else ""))
