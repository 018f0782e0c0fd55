"""Every check id a run can produce, read from the probes' source (no torch import).

A probe module's checks are the string literals it passes to ``ctx.check("...")``; its
probe name comes from ``def probe_NAME(ctx)`` (underscores become hyphens), and every
probe can also report ``NAME.run`` (it broke outside any check). The supervisor adds the
``setup`` pseudo-probe. The probe files are read afresh on every call, so a probe that
is being written right now is seen as soon as it is saved.
"""

import ast
import os

from .catalog import BUILTIN_DIR, _probes_in_file

SETUP_CHECKS = ("import_torch", "init_process_group", "final_barrier", "between_probes")


def _checks_in(tree):
    """(literal check names, whether some ctx.check() name is computed)."""
    names, dynamic = set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "check" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            else:
                dynamic = True
    return names, dynamic


def _probes_in(path):
    """{probe: (check names, dynamic)} for one file; a file's checks count for each of
    its probes (helpers outside the probe function may open checks too)."""
    probes = _probes_in_file(path)
    if not probes:
        return {}
    with open(path, encoding="utf-8") as f:
        checks = _checks_in(ast.parse(f.read(), filename=path))
    return {name: checks for name, _, _ in probes}


def known_checks(probe_paths=()):
    """{probe: (check names, dynamic)}: dynamic means a check name is computed at run
    time, so any check of that probe is accepted. Unreadable files are skipped (the
    catalog reports them when a run tries to use them)."""
    files = [os.path.join(BUILTIN_DIR, f) for f in sorted(os.listdir(BUILTIN_DIR))
             if f.endswith(".py") and not f.startswith("_")]
    files += list(probe_paths)
    probes = {"setup": (set(SETUP_CHECKS), False)}
    for path in files:
        try:
            found = _probes_in(path)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for probe, (names, dynamic) in found.items():
            names = set(names) | {"run"}
            old = probes.get(probe, (set(), False))
            probes[probe] = (old[0] | names, old[1] or dynamic)
    return probes


def unknown_reason(check_id, probes):
    """Why a check id is unknown (a sentence), or None when it is known."""
    probe, dot, check = check_id.partition(".")
    if not dot or not probe or not check:
        return "check id %r is not PROBE.CHECK" % check_id
    if probe not in probes:
        return "unknown probe %r in %r (probes: %s)" % (
            probe, check_id, ", ".join(sorted(probes)))
    names, dynamic = probes[probe]
    if check in names or dynamic:
        return None
    return "probe %r has no check %r (its checks: %s)" % (
        probe, check, ", ".join(sorted(names)))
