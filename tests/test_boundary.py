"""The boundary that makes envcheck work where torch is absent or elsewhere.

- Supervisor side (everything outside envcheck/worker/ and the probes' own modules)
  never imports torch: with a ``torch`` on the path that explodes on import, the
  commands that do not start ranks still work. It never imports envcheck/worker/ or a
  probe either: what both sides need is in envcheck/core/, and what it knows of the
  probes is their declaration (the registry: envcheck/probes/spec.py, suite.py,
  catalog.py).
- Core (envcheck/core/) is stdlib only: both sides import it, ranks under an
  interpreter that has nothing but torch included. The probe registry is stdlib and the
  core only.
- Worker side (envcheck/worker/ and the probes in envcheck/probes/) imports only the
  stdlib, torch, itself, the core and envcheck/launch/ (stdlib only, where processes are
  made: tests/test_launch.py), so ranks run under an interpreter that has torch and
  nothing of envcheck's dependencies.
"""

import ast
import os
import sys

import pytest

from conftest import ROOT, run_cli

WORKER = os.path.join(ROOT, "envcheck", "worker")
PROBES = os.path.join(ROOT, "envcheck", "probes")
# The probes' declaration, which the supervisor reads; every other module under PROBES
# is a probe's code, run in the ranks.
REGISTRY = tuple(os.path.join(PROBES, name) for name in
                 ("__init__.py", "spec.py", "suite.py", "catalog.py"))
REGISTRY_MODULES = ("envcheck.probes", "envcheck.probes.spec", "envcheck.probes.suite",
                    "envcheck.probes.catalog")


@pytest.fixture
def exploding_torch(tmp_path):
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ImportError('the supervisor side imported torch')\n")
    return {"PYTHONPATH": str(tmp_path / "fake")}


def test_supervisor_modules_do_not_import_torch(exploding_torch):
    code = (
        "import pkgutil, importlib, sys, envcheck\n"
        "for m in pkgutil.walk_packages(envcheck.__path__, 'envcheck.'):\n"
        "    if m.name.startswith('envcheck.worker') or m.name == 'envcheck.__main__':\n"
        "        continue\n"
        "    if m.name.startswith('envcheck.probes.') and m.name not in %r:\n"
        "        continue\n"
        "    importlib.import_module(m.name)\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n") % (REGISTRY_MODULES,)
    import subprocess
    env = dict(os.environ, **exploding_torch)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["probes"], ["--version"]])
def test_commands_without_ranks_work_without_torch(exploding_torch, args):
    result = run_cli(*args, env=exploding_torch)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr


CORE = os.path.join(ROOT, "envcheck", "core")
PACKAGE = os.path.join(ROOT, "envcheck")


def _worker_side(path):
    return path.startswith(WORKER + os.sep) or (
        path.startswith(PROBES + os.sep) and path not in REGISTRY)


def _files(top):
    for root, _, files in os.walk(top):
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(root, name)


def _absolute(path, name, level):
    """The dotted module an import in PATH names (relative imports resolved)."""
    if not level:
        return name
    package = os.path.relpath(os.path.dirname(path), os.path.dirname(PACKAGE))
    parts = package.split(os.sep)
    parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _imported(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(path, node.module, node.level)
            if node.level and not node.module:  # from . import a, b
                for alias in node.names:
                    yield node.lineno, "%s.%s" % (base, alias.name)
            else:
                yield node.lineno, base


def _violations(path, allowed):
    stdlib = set(sys.stdlib_module_names)
    return ["line %d: %s" % (line, name) for line, name in _imported(path)
            if name.split(".")[0] not in stdlib and not any(
                name == a or name.startswith(a + ".") for a in allowed)]


@pytest.mark.parametrize("path", sorted(p for p in _files(PACKAGE) if _worker_side(p)),
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_worker_imports_only_stdlib_torch_and_the_core(path):
    allowed = ("torch", "envcheck.worker", "envcheck.core", "envcheck.launch",
               "envcheck.probes")
    if os.sep + os.path.join("probes", "frameworks") + os.sep in path:
        # A probe that tests a framework imports it, lazily: never at module level, so
        # the catalog and the other probes never pull it in.
        allowed += FRAMEWORK_PACKAGES
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        eager = [n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                 and any((getattr(n, "module", None) or a.name).split(".")[0]
                         in FRAMEWORK_PACKAGES for a in n.names)]
        assert not eager, "framework imported at module level, lines %s" % eager
    bad = _violations(path, allowed)
    assert not bad, "worker side must import only the stdlib, torch and the core: %s" % bad


FRAMEWORK_PACKAGES = ("lightning", "accelerate", "deepspeed")


@pytest.mark.parametrize("path", sorted(_files(CORE)), ids=lambda p: os.path.relpath(p, ROOT))
def test_core_imports_only_the_stdlib(path):
    bad = _violations(path, ("envcheck.core",))
    assert not bad, "the core is imported by ranks that have only torch: %s" % bad


@pytest.mark.parametrize("path", REGISTRY, ids=lambda p: os.path.relpath(p, ROOT))
def test_the_probe_registry_imports_only_the_stdlib_and_the_core(path):
    bad = _violations(path, ("envcheck.core",) + REGISTRY_MODULES)
    assert not bad, "the supervisor reads the registry: %s" % bad


def test_supervisor_side_never_imports_the_worker_or_a_probe():
    bad = ["%s line %d: %s" % (os.path.relpath(path, ROOT), line, name)
           for path in _files(PACKAGE) if not _worker_side(path)
           for line, name in _imported(path)
           if name == "envcheck.worker" or name.startswith("envcheck.worker.")
           or (name.startswith("envcheck.probes.") and name not in REGISTRY_MODULES)]
    assert not bad, ("the supervisor side reaches the worker through envcheck.core only, "
                     "and the probes through their registry: %s" % bad)


def test_the_import_reader_resolves_relative_imports():
    """The checks above are only as good as this resolution of relative imports."""
    runtime = os.path.join(WORKER, "runtime.py")
    names = {name for _, name in _imported(runtime)}
    assert {"envcheck.core.records", "envcheck.worker.context"} <= names
    cli = {name for _, name in _imported(os.path.join(PACKAGE, "cli.py"))}
    assert {"envcheck.core.errors", "typer"} <= cli
    assert _violations(runtime, ("torch", "envcheck.worker")) == [
        "line %d: %s" % (line, name) for line, name in _imported(runtime)
        if name.startswith(("envcheck.core", "envcheck.launch"))]


def test_probe_modules_import_torch_only_inside_functions():
    for name in os.listdir(PROBES):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(PROBES, name), encoding="utf-8").read())
        for node in tree.body:  # module level only
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                    else [node.module or ""]
                assert not any(n.split(".")[0] == "torch" for n in names), \
                    "%s imports torch at module level: the supervisor reads it" % name


@pytest.mark.ranks
def test_every_probe_runs_under_an_interpreter_with_only_torch(tmp_path):
    """The real proof of the worker boundary: no typer, tabulate, packaging or numpy."""
    from conftest import checks_by_id, load_report, torch_only_python

    python = torch_only_python()
    import subprocess
    for module in ("typer", "tabulate", "packaging", "numpy"):
        assert subprocess.run([python, "-c", "import %s" % module],
                              capture_output=True).returncode != 0, module
    report = tmp_path / "r.json"
    result = run_cli("run", "--python", python, "--json", str(report), "-q",
                     "--timeout", "60")
    # all_gather_object needs numpy: the matrix expects it to pass, so exit 1.
    assert result.code == 1, result.stderr
    data = load_report(report)
    assert data["plan"]["python"] == python
    assert data["environment"]["numpy"] is None
    checks = checks_by_id(data)
    assert checks["setup.init_process_group"]["outcome"] == "passed"
    probes = {c["probe"] for c in data["checks"]}
    assert {"launch", "collectives", "serialization", "checkpoint", "ddp-sync",
            "nccl"} <= probes
    for c in data["checks"]:
        assert c["check"] != "run", "probe %s did not load: %s" % (c["probe"], c["detail"])
        if c["error"]:
            assert c["error"]["type"] not in ("ModuleNotFoundError", "ImportError"), c
    # Without numpy the one collective that pickles says so and what to install, into
    # the interpreter under test: a bare pip would install into envcheck's venv.
    gather = checks["collectives.all_gather_object"]
    assert gather["outcome"] == "failed"
    assert "%s -m pip install numpy" % python in gather["advice"], gather["advice"]


def import_graph(top=PACKAGE):
    """envcheck's modules and the envcheck modules each imports, anywhere in the file
    (an import inside a function is an edge too: it only hides a cycle). ``from pkg
    import name`` is an edge to the module ``pkg.name`` where there is one, else to
    ``pkg``."""
    root = os.path.dirname(top)
    modules = {}
    for path in _files(top):
        parts = os.path.relpath(path, root)[:-3].split(os.sep)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                base = ".".join(p for p in (base, node.module or "") if p)
                for alias in node.names:
                    target = "%s.%s" % (base, alias.name)
                    if target in modules:
                        edges.add(target)
                    elif base in modules:
                        edges.add(base)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_an_import_inside_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """At 60cb346 there were none; ``runtime → prechecks → launched → hostzygote →
    launched`` and ``zygote → __main__`` came, held together by imports inside
    functions. A zygote's fork names what it runs (``module:function``) instead."""
    graph = import_graph()
    assert "envcheck.worker.runtime" in graph and graph["envcheck.worker.runtime"]
    assert cycles(graph) == []


def same_names(top=PACKAGE):
    """Module files (not a package's ``__init__``) that share a name, as {name: [paths]}."""
    seen = {}
    for path in _files(top):
        name = os.path.basename(path)
        if name != "__init__.py":
            seen.setdefault(name, []).append(os.path.relpath(path, os.path.dirname(top)))
    return {name: sorted(paths) for name, paths in seen.items() if len(paths) > 1}


def test_no_two_modules_share_a_name():
    """A name says which module it is: 'render.py' in three packages, 'command.py' in
    four (at 38aebdc) made every grep, traceback and review ask which one."""
    assert same_names() == {}
