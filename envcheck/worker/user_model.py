"""The user's own model (``envcheck run --model pkg.mod:factory``), built inside a rank.

The supervisor has already checked the form of ``--model`` (``envcheck/run/model_spec.py``)
and put ``ctx.options["model"]`` = ``{"module" | "path": ..., "factory": ..., "spec": ...}``.
Here the factory is imported and called. Anything the user's code does wrong — an import
error, a factory that raises, a return value that is not an ``nn.Module`` — becomes a
``UserModelError`` whose message says what went wrong and whose ``__cause__`` (shown in the
check's traceback) is the user's own exception, so a probe can report it as a failed check
instead of crashing the rank::

    from ..user_model import user_model, UserModelError

    with ctx.check("model") as c:
        model = user_model(ctx)   # None without --model

Each call builds a new model (the factory runs again), which is what a "build the copy
fresh" check needs; the user's module is imported once per rank.
"""

import importlib
import importlib.util
import inspect
import os
import sys
import traceback
import zlib

# The only arguments envcheck knows how to give a factory.
_KNOWN_ARGS = ("rank", "device")


class UserModelError(Exception):
    """The user's model could not be built; ``user_traceback`` is the user's own error."""

    def __init__(self, message, user_traceback=None):
        super().__init__(message)
        self.user_traceback = user_traceback


def model_spec(ctx):
    """The ``--model`` option as planned by the supervisor, or None."""
    return (ctx.options or {}).get("model")


def user_model(ctx):
    """A new instance of the user's model on ``ctx.device``; None when no --model was given."""
    spec = model_spec(ctx)
    if not spec:
        return None
    import torch

    from . import runtime

    runtime.finish_preload()  # the user's module may import a framework the thread imports
    factory = _load_factory(spec)
    kwargs = _factory_kwargs(spec, factory, ctx)
    try:
        model = factory(**kwargs)
    except (Exception, SystemExit) as exc:
        raise _user_error("--model %s: %s(%s) raised %s: %s%s"
                          % (spec["spec"], spec["factory"], _show_kwargs(kwargs),
                             type(exc).__name__, exc, _exit_hint(exc)), exc) from exc
    if not isinstance(model, torch.nn.Module):
        raise UserModelError("--model %s: %s() returned %s, not a torch.nn.Module"
                             % (spec["spec"], spec["factory"], _describe(model)))
    try:
        return model.to(ctx.device)
    except Exception as exc:
        raise _user_error("--model %s: moving the model to %s raised %s: %s"
                          % (spec["spec"], ctx.device, type(exc).__name__, exc), exc) from exc


def describe_model(model):
    """``ClassName, 1,234 parameters`` for check details."""
    count = sum(p.numel() for p in model.parameters())
    return "%s, %s parameters" % (type(model).__name__, format(count, ","))


def _load_factory(spec):
    try:
        module = _import_path(spec["path"]) if spec.get("path") else _import_module(spec["module"])
    except (Exception, SystemExit) as exc:
        # SystemExit too: a training script that parses sys.argv at import time exits.
        where = spec.get("path") or spec["module"]
        raise _user_error("--model %s: importing %s failed with %s: %s%s"
                          % (spec["spec"], where, type(exc).__name__, exc,
                             _exit_hint(exc)), exc) from exc
    factory = getattr(module, spec["factory"], None)
    if factory is None:
        raise UserModelError("--model %s: %s has no attribute %r"
                             % (spec["spec"], spec.get("path") or spec["module"],
                                spec["factory"]))
    if not callable(factory):
        raise UserModelError("--model %s: %s is %s, not callable"
                             % (spec["spec"], spec["factory"], _describe(factory)))
    return factory


def _import_module(name):
    # Ranks run in the user's cwd; `python -m` puts it first on sys.path, but a rank
    # started some other way (or with -P) may not have it.
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    return importlib.import_module(name)


def _import_path(path):
    # Same name in every rank, so a model pickled in one rank unpickles in another.
    name = "envcheck_user_model_%08x" % zlib.crc32(path.encode("utf-8"))
    module = sys.modules.get(name)
    if module is not None:
        return module
    # Like `python file.py`, let the file import its neighbours; appended, so they
    # cannot shadow torch or envcheck.
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.append(folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ImportError("cannot load %s as a Python module" % path)
    module = importlib.util.module_from_spec(spec)
    # Registered before running, so classes it defines can be pickled by name.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _factory_kwargs(spec, factory, ctx):
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return {}  # builtins and some C types have no signature: call with nothing
    values = {"rank": ctx.rank, "device": ctx.device}
    kwargs = {}
    for p in params.values():
        if p.kind == p.VAR_KEYWORD:
            for key in _KNOWN_ARGS:
                kwargs.setdefault(key, values[key])
        elif p.name in _KNOWN_ARGS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            kwargs[p.name] = values[p.name]
        elif p.kind in (p.VAR_POSITIONAL,) or p.default is not p.empty:
            continue
        else:
            raise UserModelError(
                "--model %s: %s%s needs argument %r, but envcheck can only pass rank= "
                "and device=; give it a default or wrap it in a factory that takes none"
                % (spec["spec"], spec["factory"], inspect.signature(factory), p.name))
    return kwargs


def _user_error(message, exc):
    return UserModelError(message, "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)))


def _exit_hint(exc):
    if isinstance(exc, SystemExit):
        return (" (it called sys.exit: does it parse command-line arguments at import "
                "time? point --model at a module that only defines the model)")
    return ""


def _show_kwargs(kwargs):
    return ", ".join("%s=%r" % (k, str(v) if k == "device" else v) for k, v in kwargs.items())


def _describe(value):
    from ..core.text import shorten  # the one truncation rule

    return "%s %s" % (type(value).__name__, shorten(repr(value), 60))
