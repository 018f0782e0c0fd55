"""Which probes exist, and which checks each declares, found without importing them.

Built-in probes are the modules of ``envcheck.probes``; custom probes come from
files given with ``--probe-path`` and from the ``envcheck.probes`` entry-point group of
installed packages. A probe is any top-level ``def probe_NAME(ctx)`` (underscores in NAME
become dashes); its docstring's first line is its summary. Files are read as syntax
trees, not imported: importing would import torch, and the supervisor never does.

A probe *declares* its checks in a module-level ``CHECKS``: a tuple of check names for
the file's probes, or a dict ``{"probe-name": (...)}`` when a file holds several. The
ranks refuse a check that is not declared, so the declaration is what ``envcheck
probes --checks`` lists and what the matrix validates check ids against. A custom probe
without ``CHECKS`` may report any check (the matrix then accepts any check of it).

The order probes run in, and the plan entries handed to the ranks, come from here for
both drivers (``envcheck run`` and launcher mode).
"""

import ast
import importlib.metadata
import importlib.util
import os

from ..core import limits
from ..core.errors import UsageError
from .spec import FollowUp, Probe, world_size_rule
from .suite import SUITE

# What the drivers report outside any probe, as the pseudo-probe ``setup``.
SETUP = "setup"
# The rendezvous pre-checks (core/network/prechecks.py) run between the two first.
SETUP_CHECKS = ("import_torch", "open_files", "processes", "tmpdir", "master_addr",
                "master_port",
                "host_name", "socket_interface",
                "init_process_group", "final_barrier", "between_probes")
# Every probe may also report ``run``: it broke outside any of its checks.
RUN = "run"
# Setup checks that exist only as a fault: a rank that hangs or dies after its last probe
# or between two (run/merge.py). They record envcheck's supervision, not a behaviour of
# torch, so no release can be observed passing them and the matrix holds none.
FAULT_ONLY = ("setup.final_barrier", "setup.between_probes")


def _declared(tree, path):
    """The module's ``CHECKS`` value (a tuple or a dict), or None."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "CHECKS" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise ValueError("%s line %d: CHECKS must be a literal tuple of check "
                                 "names (or a dict of them by probe)"
                                 % (path, node.lineno)) from None
            return value, node.lineno
    return None, None


def _follow_ups(tree, path, found):
    """{probe name: (follow-up, ...)} from the module's ``FOLLOW_UPS``.

    A follow-up is a phase ``envcheck run`` starts after the main run, at another world
    size: ``{"function": NAME, "world_size": "N+1" | "N-1" | 1, "check": CHECK}`` runs
    the module-level function NAME (not a probe) in every rank of a job of that size;
    "N" is the main run's world size. It reports CHECK, one of the probe's checks, and
    the checks of an optional ``"also": (CHECK, ...)``: a phase that cannot run reports
    each of them skipped, saying why. A tuple applies to the file's probes, a dict
    ``{"probe-name": (...)}`` to one each.
    """
    value, line = None, None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "FOLLOW_UPS" for t in node.targets):
            try:
                value, line = ast.literal_eval(node.value), node.lineno
            except ValueError:
                raise ValueError("%s line %d: FOLLOW_UPS must be a literal tuple of dicts"
                                 % (path, node.lineno)) from None
    if value is None:
        return {}
    where = "%s line %s" % (path, line)
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    by_probe = value if isinstance(value, dict) else {name: value for name, *_ in found}
    out = {}
    for probe, items in by_probe.items():
        checks = next((c for name, _, _, c in found if name == probe), ())
        if not isinstance(items, (tuple, list)):
            raise ValueError("%s: FOLLOW_UPS must list dicts" % where)
        for item in items:
            if not isinstance(item, dict) or not (
                    {"function", "world_size", "check"} <= set(item)
                    <= {"function", "world_size", "check", "also"}):
                raise ValueError("%s: a follow-up is a dict with function, world_size and "
                                 "check, and optionally also" % where)
            also = item.get("also", ())
            if not isinstance(also, (tuple, list)) or not all(isinstance(a, str)
                                                              for a in also):
                raise ValueError("%s: a follow-up's also is a tuple of check names" % where)
            if item["function"] not in functions:
                raise ValueError("%s: follow-up function %r is not defined in the file"
                                 % (where, item["function"]))
            world_size_rule(item["world_size"], where)
            for check in (item["check"],) + tuple(also):
                if checks is not None and check not in checks:
                    raise ValueError("%s: follow-up check %r is not in CHECKS"
                                     % (where, check))
        out[probe] = tuple(FollowUp(i["function"], i["world_size"], i["check"],
                                    tuple(i.get("also", ()))) for i in items)
    return out


def _source(path):
    """A probe file's text: a regular file, read without blocking (a FIFO is a
    ValueError, not a hang)."""
    return limits.read_input(path, 16 << 20).decode("utf-8")


# Parsed probe files, by (path, size, mtime): every command reads the built-in probes'
# declarations several times (the catalog, the matrix's check ids), and parsing them all
# was a third of what 'envcheck report' spent on the CPU.
_TREES: dict = {}


def _tree(path):
    try:
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    except OSError:
        key = None
    tree = _TREES.get(key) if key else None
    if tree is None:
        tree = ast.parse(_source(path), filename=path)
        if key:
            _TREES[key] = tree
    return tree


def follow_ups_in_file(path):
    """{probe name: follow-ups} a file declares (ValueError when malformed)."""
    tree = _tree(path)
    return _follow_ups(tree, path, probes_in_file(path))


def _names(value, where):
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, str) and v and "." not in v for v in value):
        raise ValueError("%s: CHECKS must list check names (strings without dots)" % where)
    if len(set(value)) != len(value):
        raise ValueError("%s: CHECKS names a check twice" % where)
    return tuple(value)


def probes_in_file(path):
    """[(name, function, summary, checks)] for the probes one file defines.

    ValueError (or SyntaxError, OSError) when the file or its CHECKS is malformed.
    """
    tree = _tree(path)
    found: list = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name.startswith("probe_") and len(node.name) > len("probe_"):
            doc = ast.get_docstring(node) or ""
            summary = doc.strip().splitlines()[0] if doc.strip() else ""
            found.append([node.name[len("probe_"):].replace("_", "-"), node.name, summary])
    declared, line = _declared(tree, path)
    where = "%s line %s" % (path, line)
    for item in found:
        if declared is None:
            item.append(None)
        elif isinstance(declared, dict):
            checks = declared.get(item[0])
            item.append(None if checks is None else _names(checks, where))
        else:
            item.append(_names(declared, where))
    if isinstance(declared, dict):
        unknown = sorted(set(declared) - {item[0] for item in found})
        if unknown:
            raise ValueError("%s: CHECKS names no probe of this file: %s"
                             % (where, ", ".join(unknown)))
    return [tuple(item) for item in found]


def builtin_probes():
    """The built-in suite, in the order it runs."""
    return list(SUITE)


def _file_probes(path):
    if not os.path.exists(path):
        raise UsageError("--probe-path %s: no such file" % path)
    if not os.path.isfile(path):
        raise UsageError("--probe-path %s: not a regular file" % path)
    try:
        found = probes_in_file(path)
        follow = follow_ups_in_file(path)
    except SyntaxError as exc:
        raise UsageError("--probe-path %s: syntax error on line %s: %s"
                         % (path, exc.lineno, exc.msg)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("--probe-path %s: cannot read it (%s)" % (path, exc)) from None
    except ValueError as exc:
        raise UsageError("--probe-path %s" % exc) from None
    if not found:
        raise UsageError("--probe-path %s defines no probe: write a top-level "
                         "'def probe_NAME(ctx):'" % path)
    path = os.path.abspath(path)
    return [Probe(name, summary, function, checks, path=path,
                      follow_ups=follow.get(name, ()))
            for name, function, summary, checks in found]


def _entry_point_probes():
    specs = []
    for ep in importlib.metadata.entry_points(group="envcheck.probes"):
        module = ep.value.split(":")[0].strip()
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin or not os.path.isfile(spec.origin):
            raise UsageError("entry point envcheck.probes:%s names %r, which cannot be "
                             "found" % (ep.name, ep.value))
        try:
            found = probes_in_file(spec.origin)
            follow = follow_ups_in_file(spec.origin)
        except (SyntaxError, ValueError, OSError) as exc:
            raise UsageError("entry point envcheck.probes:%s: %s" % (ep.name, exc)) from None
        specs += [Probe(name, summary, function, checks, module=module,
                            follow_ups=follow.get(name, ()))
                  for name, function, summary, checks in found]
    return specs


def all_probes(probe_paths=()):
    """Every known probe, built-ins first; a custom probe may not reuse a name."""
    specs = builtin_probes()
    extra = _entry_point_probes()
    for path in probe_paths:
        extra.extend(_file_probes(path))
    names = {s.name: s for s in specs}
    for spec in extra:
        if spec.name in names or spec.name == SETUP:
            where = spec.path or spec.module
            raise UsageError("probe %r from %s clashes with an existing probe of that "
                             "name: rename its function" % (spec.name, where))
        names[spec.name] = spec
        specs.append(spec)
    return specs


def probe_name(text):
    """A probe as the user may write it: ``my_setup`` (the function's spelling) or
    ``my-setup`` (the name envcheck prints) are one probe."""
    return text.strip().replace("_", "-")


def opt_in(spec):
    """Does this probe run only when asked for by name?"""
    return spec.opt_in


def select(specs, wanted=(), skipped=()):
    """The probes to run, in catalog order; unknown names are an error. Without
    ``wanted``, every probe but the opt-in ones."""
    known = [s.name for s in specs]
    wanted, skipped = [probe_name(n) for n in wanted], [probe_name(n) for n in skipped]
    for name in wanted + skipped:
        if name not in known:
            raise UsageError("unknown probe %r; known probes: %s" % (name, ", ".join(known)))
    chosen = [s for s in specs if (s.name in wanted if wanted else not opt_in(s))
              and s.name not in skipped]
    if not chosen:
        raise UsageError("no probe left to run after --probe/--skip")
    return chosen


def known_checks(probe_paths=()):
    """{probe: (check names, any)}: ``any`` when the probe declares none. Files that
    cannot be read are left out (a run that uses them reports why)."""
    probes = {SETUP: (set(SETUP_CHECKS), False)}
    for spec in SUITE:
        probes[spec.name] = (set(spec.checks or ()) | {RUN}, spec.checks is None)
    for path in probe_paths:
        try:
            found = probes_in_file(path)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for name, _, _, checks in found:
            probes[name] = (set(checks or ()) | {RUN}, checks is None)
    return probes


def unknown_reason(check_id, probes):
    """Why a check id is unknown (a sentence), or None when it is known."""
    probe, dot, check = check_id.partition(".")
    if not dot or not probe or not check:
        return "check id %r is not PROBE.CHECK" % check_id
    if probe not in probes:
        return "unknown probe %r in %r (probes: %s)" % (
            probe, check_id, ", ".join(sorted(probes)))
    names, undeclared = probes[probe]
    if check in names or undeclared:
        return None
    return "probe %r has no check %r (its checks: %s)" % (
        probe, check, ", ".join(sorted(names)))
