"""Is a framework there, in the ranks' interpreter, and may its setup check run?

Shared by the frameworks probe and its Fabric and Accelerate halves: a framework that
is not installed skips its checks (or fails them, where ``--framework`` asked for it).
"""

import importlib.metadata
import importlib.util

from ...core.frameworks import FRAMEWORKS


def present(ctx, key):
    """(installed, version or "", asked for with --framework)."""
    asked = key in ((ctx.options or {}).get("frameworks") or ())
    framework = FRAMEWORKS[key]
    for module in framework.modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            version = ""
            for dist in framework.distributions:
                try:
                    version = importlib.metadata.version(dist)
                    break
                except importlib.metadata.PackageNotFoundError:
                    continue
            return True, version, asked
    return False, "", asked


def absent(c, name, key, asked):
    words = ("%s is not installed in the ranks' interpreter" % name)
    if asked:
        c.fail(words + " (asked for with --framework %s)" % key,
               advice="install it in the training environment, at the version you train "
                      "with, or point --python at that environment's interpreter")
    c.skip(words + " (--framework %s makes this a failure)" % key)


def gate(c, model, present, name, key, call):
    """The start of a framework's setup check: skip (or fail, where asked for) without the
    framework; fail where the ranks' models differ; else the advice for ``call``."""
    installed, _, asked = present
    if not installed:
        absent(c, name, key, asked)
    if model.skip:
        c.fail(model.skip, advice="every rank must build the same model before %s" % call)
    c.advice = "%s failed: see the traceback" % call
