"""Which probes exist, found without importing them (so without importing torch).

Built-in probes are the modules of ``envcheck.worker.probes``; custom probes come from
files given with ``--probe-path`` and from the ``envcheck.probes`` entry-point group of
installed packages. A probe is any top-level ``def probe_NAME(ctx)``; it is found by
reading the file's syntax tree, because importing it would import torch here.
"""

import ast
import dataclasses
import importlib.metadata
import importlib.util
import os

from .errors import UsageError

BUILTIN_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "worker", "probes")
BUILTIN_ORDER = ("launch", "collectives", "nccl", "serialization", "checkpoint", "ddp-sync")


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    name: str
    summary: str
    function: str
    module: str = None  # importable module name (built-in and entry-point probes)
    path: str = None  # file path (--probe-path probes)
    builtin: bool = False

    def plan_entry(self):
        entry = {"name": self.name, "function": self.function}
        if self.path:
            entry["path"] = self.path
        else:
            entry["module"] = self.module
        return entry


def _probes_in_file(path):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name.startswith("probe_") and len(node.name) > len("probe_"):
            doc = ast.get_docstring(node) or ""
            summary = doc.strip().splitlines()[0] if doc.strip() else ""
            found.append((node.name[len("probe_"):].replace("_", "-"), node.name, summary))
    return found


def builtin_probes():
    specs = []
    for filename in sorted(os.listdir(BUILTIN_DIR)):
        if not filename.endswith(".py") or filename.startswith("_"):
            continue
        module = "envcheck.worker.probes." + filename[:-3]
        for name, function, summary in _probes_in_file(os.path.join(BUILTIN_DIR, filename)):
            specs.append(ProbeSpec(name, summary, function, module=module, builtin=True))
    order = {name: i for i, name in enumerate(BUILTIN_ORDER)}
    return sorted(specs, key=lambda s: (order.get(s.name, len(order)), s.name))


def _file_probes(path):
    if not os.path.isfile(path):
        raise UsageError("--probe-path %s: no such file" % path)
    try:
        found = _probes_in_file(path)
    except SyntaxError as exc:
        raise UsageError("--probe-path %s: syntax error on line %s: %s"
                         % (path, exc.lineno, exc.msg)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("--probe-path %s: cannot read it (%s)" % (path, exc)) from None
    if not found:
        raise UsageError("--probe-path %s defines no probe: write a top-level "
                         "'def probe_NAME(ctx):'" % path)
    path = os.path.abspath(path)
    return [ProbeSpec(name, summary, function, path=path) for name, function, summary in found]


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
        for name, function, summary in _probes_in_file(spec.origin):
            specs.append(ProbeSpec(name, summary, function, module=module))
    return specs


def all_probes(probe_paths=()):
    """Every known probe, built-ins first; a custom probe may not reuse a name."""
    specs = builtin_probes()
    extra = _entry_point_probes()
    for path in probe_paths:
        extra.extend(_file_probes(path))
    names = {s.name: s for s in specs}
    for spec in extra:
        if spec.name in names:
            where = spec.path or spec.module
            raise UsageError("probe %r from %s clashes with an existing probe of that "
                             "name: rename its function" % (spec.name, where))
        names[spec.name] = spec
        specs.append(spec)
    return specs


def select(specs, wanted=(), skipped=()):
    """The probes to run, in catalog order; unknown names are an error."""
    known = [s.name for s in specs]
    for name in list(wanted) + list(skipped):
        if name not in known:
            raise UsageError("unknown probe %r; known probes: %s" % (name, ", ".join(known)))
    chosen = [s for s in specs if (not wanted or s.name in wanted) and s.name not in skipped]
    if not chosen:
        raise UsageError("no probe left to run after --probe/--skip")
    return chosen
