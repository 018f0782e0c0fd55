"""A module the process imports that its Python does not find (issue #34, phase AC:
ultralytics/ultralytics#9103, every DDP rank of a generated script failing to import a
clone that was not installed). The tracebacks are real: a job imports a module that is
not there, directly or through a library it imports, and CPython says so."""

import subprocess
import sys

import pytest

from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def _run(tmp_path, source, lib=None):
    """The stderr lines of ``source`` run as train.py (``lib``: somelib/core.py's source,
    installed under a site-packages on its path)."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    if lib is not None:
        (site / "somelib").mkdir(parents=True)
        (site / "somelib" / "__init__.py").write_text("")
        (site / "somelib" / "core.py").write_text(lib)
    train = tmp_path / "train.py"
    train.write_text("import sys\nsys.path.insert(0, sys.argv[1])\n" + source)
    proc = subprocess.run([sys.executable, str(train), str(site)], capture_output=True,
                          text=True, timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    return proc.stderr.splitlines(), str(train), str(site / "somelib" / "core.py")


def _explain(lines, tmp_path, matrix, prefix=""):
    log = tmp_path / "job.log"
    log.write_text("".join(prefix + ln + "\n" for ln in lines), encoding="utf-8")
    return command.explain([str(log)], matrix=matrix)


def test_the_jobs_import_of_a_module_not_installed_names_it_and_where(tmp_path, matrix):
    lines, train, _ = _run(tmp_path, "import ultralytics_not_here\n")
    assert lines[-1] == "ModuleNotFoundError: No module named 'ultralytics_not_here'"
    result = _explain(lines, tmp_path, matrix, prefix="[rank2]:")
    assert [f.signature.id for f in result.findings] == ["env.module_missing"]
    assert result.findings[0].cause.endswith(
        "(ultralytics_not_here, imported at %s:3, in <module>)" % train)
    assert result.findings[0].ranks == {2}


def test_a_librarys_import_of_a_dependency_not_installed_names_the_library_frame(
        tmp_path, matrix):
    lines, _, core = _run(tmp_path, "from somelib import core\n",
                          lib="import numpy\nimport flash_attn_not_here\n")
    assert lines[-1] == "ModuleNotFoundError: No module named 'flash_attn_not_here'"
    result = _explain(lines, tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["env.module_missing"]
    assert result.findings[0].cause.endswith(
        "(flash_attn_not_here, imported at %s:2, in <module>)" % core)


def test_a_module_of_a_package_and_the_line_without_a_traceback_are_not_it(tmp_path, matrix):
    """A dotted name is another reading's (a package's own module, another package's); a
    line with no traceback above it may be an optional import's warning."""
    lines, _, _ = _run(tmp_path, "import email.not_a_module_here\n")
    assert lines[-1] == "ModuleNotFoundError: No module named 'email.not_a_module_here'"
    result = _explain(lines, tmp_path, matrix)
    assert "env.module_missing" not in [f.signature.id for f in result.findings]
    lines, _, _ = _run(tmp_path, "import apex_not_here\n")
    result = _explain(lines[-1:], tmp_path, matrix)
    assert result.findings == []
