"""The built-in suite (envcheck/probes/suite.py) against the probes' code.

The suite is one declared list: these tests keep it true to the modules it names, so
that a probe cannot report a check it does not declare, declare one it never opens, be
left out of the list, or reach into another probe's internals (what they share is in
envcheck/probes/shared/). No probe reads a test-only hook: the fault tests load their
faults as test probes (tests/data/probes/).
"""

import ast
import importlib
import os

import pytest

from conftest import ROOT, run_cli
from envcheck.probes import catalog
from envcheck.probes.spec import FollowUp, Probe
from envcheck.probes.suite import SUITE

PROBES = os.path.join(ROOT, "envcheck", "probes")
REGISTRY = ("__init__.py", "spec.py", "suite.py", "catalog.py")
SHARED = "shared"
DECLARATIONS = ("suite", "spec")


def _package_files(spec):
    """The files of a built-in probe: its module, or every module of its package."""
    path = importlib.util.find_spec(spec.module).origin
    if os.path.basename(path) != "__init__.py":
        return [path]
    top = os.path.dirname(path)
    return sorted(os.path.join(top, f) for f in os.listdir(top) if f.endswith(".py"))


def _tree(path):
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), filename=path)


def _opened_checks(paths):
    """Check names opened with a literal: ``ctx.check("name")``."""
    found = set()
    for path in paths:
        for node in ast.walk(_tree(path)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "check" and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)):
                found.add(node.args[0].value)
    return found


def _strings(paths):
    return {node.value for path in paths for node in ast.walk(_tree(path))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def _probe_files():
    """Every module under envcheck/probes/ that is a probe's code (not the registry)."""
    for root, _, files in os.walk(PROBES):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".py") and not (root == PROBES and name in REGISTRY):
                yield path


@pytest.mark.parametrize("spec", SUITE, ids=lambda s: s.name)
def test_each_entry_names_a_function_of_its_module(spec):
    module = importlib.import_module(spec.module)  # probe modules import torch lazily
    assert callable(getattr(module, spec.function, None)), spec
    for follow in spec.follow_ups:
        assert callable(getattr(module, follow.function, None)), follow


@pytest.mark.parametrize("spec", SUITE, ids=lambda s: s.name)
def test_a_probe_opens_only_the_checks_it_declares_and_names_each(spec):
    files = _package_files(spec)
    undeclared = _opened_checks(files) - set(spec.checks)
    assert not undeclared, "%s opens checks it does not declare: %s" % (spec.name, undeclared)
    # A check opened through a variable (a loop over names) still names its check
    # somewhere in the probe's code; a follow-up's are the phase's (ctx.phase["check"]).
    phases = {c for f in spec.follow_ups for c in f.checks}
    never = set(spec.checks) - _strings(files) - phases
    assert not never, "%s declares checks its code never names: %s" % (spec.name, never)


def test_every_probe_function_is_in_the_suite():
    declared = {(s.module, s.function) for s in SUITE}
    found = set()
    for path in _probe_files():
        module = "envcheck." + os.path.relpath(path, os.path.dirname(PROBES))[:-3].replace(
            os.sep, ".").replace(".__init__", "")
        for node in _tree(path).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("probe_"):
                found.add((module, node.name))
    assert found == declared


def test_no_probe_module_declares_what_the_suite_declares():
    """CHECKS, FOLLOW_UPS or PRELOAD in a built-in module would be ignored: the suite is
    what counts (custom probes keep their literals, as the README documents)."""
    bad = []
    for path in _probe_files():
        for node in _tree(path).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id in (
                        "CHECKS", "FOLLOW_UPS", "PRELOAD", "PRELOAD_IN_RANK")
                    for t in node.targets):
                bad.append("%s line %d" % (os.path.relpath(path, ROOT), node.lineno))
    assert not bad


def _probe_of(path):
    """The probe (or "shared") a file under envcheck/probes/ belongs to."""
    rel = os.path.relpath(path, PROBES).split(os.sep)
    return rel[0][:-3] if len(rel) == 1 else rel[0]


def test_no_probe_imports_another_probes_internals():
    bad = []
    for path in _probe_files():
        mine = _probe_of(path)
        package = "envcheck." + os.path.relpath(os.path.dirname(path), os.path.dirname(
            PROBES)).replace(os.sep, ".")
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + (
                    [node.module] if node.module else []))
            else:
                base = node.module or ""
            names = [base] if node.module else ["%s.%s" % (base, a.name) for a in node.names]
            for name in names:
                if not name.startswith("envcheck.probes."):
                    continue
                theirs = name.split(".")[2]
                # The registry (the suite's declarations) is every probe's to read: a
                # probe that reruns another loads it from there (repeat).
                if theirs not in (mine, SHARED) + DECLARATIONS and mine != SHARED:
                    bad.append("%s line %d: %s" % (os.path.relpath(path, ROOT),
                                                   node.lineno, name))
                if mine == SHARED and theirs != SHARED:
                    bad.append("%s line %d: shared code imports a probe: %s"
                               % (os.path.relpath(path, ROOT), node.lineno, name))
    assert not bad


def test_the_guard_sees_a_probe_reaching_into_another(tmp_path, monkeypatch):
    """The import guard above, on a probe that imports nccl's internals, as bandwidth did
    before the shared helpers moved to probes/shared/."""
    (tmp_path / "probes").mkdir()
    fake = tmp_path / "probes" / "bandwidth.py"
    fake.write_text("from .nccl import _human\nfrom .shared.units import human_bytes\n")
    monkeypatch.setattr("test_probe_suite._probe_files", lambda: [str(fake)])
    monkeypatch.setattr("test_probe_suite.PROBES", str(tmp_path / "probes"))
    with pytest.raises(AssertionError) as failed:
        test_no_probe_imports_another_probes_internals()
    assert "bandwidth.py line 1" in str(failed.value)
    assert "line 2" not in str(failed.value)


def test_no_product_code_reads_a_test_hook():
    hooks = []
    for root, _, files in os.walk(os.path.join(ROOT, "envcheck")):
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    if "ENVCHECK_TEST_" in f.read():
                        hooks.append(os.path.join(root, name))
    assert not hooks


def test_the_suite_is_the_catalogs_order_and_fsdp_mesh_and_repeat_are_opt_in():
    names = [s.name for s in catalog.builtin_probes()]
    assert names == [s.name for s in SUITE]
    assert [s.name for s in SUITE if s.opt_in] == ["fsdp", "mesh", "repeat"]
    assert [s.name for s in catalog.select(catalog.builtin_probes())] == names[:-3]


def test_a_probe_declaration_that_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="follow-up check"):
        Probe(name="x", summary="", function="probe_x", module="m", checks=("a",),
              follow_ups=(FollowUp("f", "N+1", "b"),))
    with pytest.raises(ValueError, match="distinct"):
        Probe(name="x", summary="", function="probe_x", module="m", checks=("a", "a"))
    with pytest.raises(ValueError, match="world_size"):
        FollowUp("f", "M+1", "a")
    assert FollowUp("f", "N+1", "a").size(4) == 5
    assert FollowUp("f", "1", "a").size(4) == 1


def test_the_plan_entry_carries_what_a_rank_preloads():
    by_name = {s.name: s.plan_entry() for s in SUITE}
    assert by_name["checkpoint"]["preload"] == ["torch._dynamo",
                                                "torch.distributed.checkpoint"]
    assert by_name["frameworks"]["preload_in_rank"] == ["lightning.fabric", "accelerate"]
    assert by_name["launch"]["preload"] == [] and by_name["launch"]["module"] == \
        "envcheck.probes.launch"


def test_envcheck_probes_lists_the_suite_in_order():
    result = run_cli("probes")
    assert result.code == 0, result.stderr
    rows = [line.split()[0] for line in result.stdout.splitlines()[2:] if line.strip()]
    assert rows == [s.name for s in SUITE]
