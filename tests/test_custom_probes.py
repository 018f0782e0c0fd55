"""Custom probes: --probe-path files and the envcheck.probes entry-point group."""

import os
import textwrap

import pytest

from conftest import checks_by_id, load_report, run_cli

pytestmark = pytest.mark.ranks  # every test here starts real ranks

GOOD = '''
"""A team's own checks."""


def probe_team_setup(ctx):
    """our training setup works"""
    import torch
    with ctx.check("tensor_math") as c:
        c.detail = "2+2=%d on rank %d" % (int(torch.tensor(2) + 2), ctx.rank)
    with ctx.check("skipped_here") as c:
        c.skip("needs 8 GPUs, found 0")


def helper_not_a_probe(ctx):
    raise AssertionError("only probe_* functions are probes")
'''


def test_probe_path_runs_and_lists(write_probes, tmp_path):
    path = write_probes(GOOD)
    listed = run_cli("probes", "--probe-path", path)
    assert listed.code == 0
    assert "team-setup" in listed.stdout and "our training setup works" in listed.stdout
    assert "helper" not in listed.stdout

    report = tmp_path / "r.json"
    # The function's spelling names the probe too (probe_team_setup: team-setup).
    result = run_cli("run", "--probe-path", path, "-p", "team_setup", "--json", str(report),
                     "-q")
    assert result.code == 0, result.stdout + result.stderr
    checks = checks_by_id(load_report(report))
    assert checks["team-setup.tensor_math"]["outcome"] == "passed"
    assert checks["team-setup.tensor_math"]["detail"] == "2+2=4 on rank 0"
    assert checks["team-setup.skipped_here"]["outcome"] == "skipped"
    assert checks["team-setup.skipped_here"]["detail"] == "needs 8 GPUs, found 0"


def test_probe_file_that_fails_to_import_is_a_failed_check(write_probes, tmp_path):
    path = write_probes('import no_such_module_anywhere\n\ndef probe_broken(ctx):\n    pass\n')
    report = tmp_path / "r.json"
    result = run_cli("run", "--probe-path", path, "-p", "broken", "--json", str(report), "-q")
    assert result.code == 1
    check = checks_by_id(load_report(report))["broken.run"]
    assert check["outcome"] == "failed"
    assert check["error"]["type"] == "ModuleNotFoundError"
    assert "no_such_module_anywhere" in check["detail"]


@pytest.mark.parametrize("source,message", [
    (None, "no such file"),
    ("def probe_(ctx):\n    pass\n\ndef other(ctx):\n    pass\n", "defines no probe"),
    ("def probe_x(ctx):\n  pass\n pass\n", "syntax error on line 3"),
    ("def probe_launch(ctx):\n    pass\n", "clashes with an existing probe"),
])
def test_bad_probe_files_are_one_line_errors(write_probes, tmp_path, source, message):
    path = str(tmp_path / "missing.py") if source is None else write_probes(source)
    result = run_cli("run", "--probe-path", path)
    assert result.code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_entry_point_probes_of_an_installed_package(tmp_path):
    site = tmp_path / "site"
    pkg = site / "acme_probes"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent('''
        def probe_acme(ctx):
            """acme's cluster check"""
            with ctx.check("hello") as c:
                c.detail = "from an installed package"
    '''))
    dist = site / "acme_probes-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-probes\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[envcheck.probes]\nacme = acme_probes\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site),
                                                       os.environ.get("PYTHONPATH")]))}
    listed = run_cli("probes", env=env)
    assert "acme" in listed.stdout and "acme's cluster check" in listed.stdout
    report = tmp_path / "r.json"
    result = run_cli("run", "-p", "acme", "--json", str(report), "-q", env=env)
    assert result.code == 0, result.stderr
    assert checks_by_id(load_report(report))["acme.hello"]["detail"] == \
        "from an installed package"


def test_readme_probe_example_runs(tmp_path):
    readme = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md"),
                  encoding="utf-8").read()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "readme_probe.py"
    path.write_text(block)
    report = tmp_path / "r.json"
    result = run_cli("run", "--probe-path", str(path), "-p", "my-setup", "--json",
                     str(report), "-q")
    assert result.code == 0, result.stdout
    check = checks_by_id(load_report(report))["my-setup.same_cpu_count"]
    assert check["outcome"] == "passed"
    assert check["detail"] == "%d CPUs on each of 2 ranks" % os.cpu_count()
    listed = run_cli("probes", "--checks", "--probe-path", str(path))
    assert listed.stdout.splitlines()[-2:] == ["my-setup.same_cpu_count", "my-setup.run"]


DECLARED = '''
CHECKS = {"declared": ("listed",), "strict": ("one",)}


def probe_declared(ctx):
    """reports only what it declares"""
    with ctx.check("listed") as c:
        c.detail = "fine"


def probe_strict(ctx):
    """declares one check, then opens another"""
    with ctx.check("one"):
        pass
    with ctx.check("two"):
        pass
'''


def test_declared_checks_are_listed_and_enforced(write_probes, tmp_path):
    path = write_probes(DECLARED)
    listed = run_cli("probes", "--checks", "--probe-path", path)
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[:11] == ["setup.import_torch", "setup.open_files", "setup.processes",
                         "setup.tmpdir", "setup.master_addr", "setup.master_port",
                         "setup.host_name", "setup.socket_interface",
                         "setup.init_process_group", "setup.final_barrier",
                         "setup.between_probes"]
    assert lines[-4:] == ["declared.listed", "declared.run", "strict.one", "strict.run"]
    assert "collectives.all_gather_object" in lines

    report = tmp_path / "r.json"
    result = run_cli("run", "--probe-path", path, "-p", "declared", "-p", "strict",
                     "--json", str(report), "-q")
    assert result.code == 1
    checks = checks_by_id(load_report(report))
    assert checks["declared.listed"]["outcome"] == "passed"
    assert checks["strict.one"]["outcome"] == "passed"
    assert "strict.two" not in checks
    run = checks["strict.run"]
    assert (run["outcome"], run["error"]["type"]) == ("failed", "UndeclaredCheck")
    assert run["error"]["message"] == ("probe 'strict' reports check 'two', which its "
                                       "CHECKS does not declare (one)")


@pytest.mark.parametrize("declaration,message", [
    ("CHECKS = ('a', 1)", "CHECKS must list check names"),
    ("CHECKS = ('a', 'a')", "CHECKS names a check twice"),
    ("CHECKS = ['a.b']", "CHECKS must list check names"),
    ("CHECKS = tuple('ab')", "CHECKS must be a literal tuple"),
    ("CHECKS = {'other': ('a',)}", "CHECKS names no probe of this file: other"),
])
def test_a_malformed_declaration_is_a_one_line_error(write_probes, declaration, message):
    path = write_probes(declaration + "\n\n\ndef probe_x(ctx):\n    pass\n")
    result = run_cli("probes", "--probe-path", path)
    assert result.code == 2
    assert result.stderr.startswith("envcheck: error: --probe-path %s line 1: " % path)
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_matrix_validates_against_the_declaration(write_probes, tmp_path):
    path = write_probes(DECLARED)
    team = tmp_path / "team"
    team.mkdir()
    (team / "ours.toml").write_text(
        '[[expectation]]\ncheck = "strict.two"\ntorch = ">=2.0"\noutcome = "passed"\n'
        'source = "https://example.org/ours"\n')
    result = run_cli("matrix", "--validate", "--matrix", str(team), "--probe-path", path)
    assert result.code == 2
    assert "probe 'strict' has no check 'two' (its checks: one, run)" in result.stderr
