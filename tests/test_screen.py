"""The screen on a real terminal: every line fits at 80 and 120 columns.

Run under script(1), which gives envcheck a pseudo-terminal of its own, as a user's
terminal would; pipes and files keep the full layout (the other tests read those).
"""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, STUCK, checks_by_id, load_report, run_cli

pytestmark = pytest.mark.skipif(shutil.which("script") is None,
                                reason="needs script(1) (util-linux) for a terminal")


def on_terminal(columns, *args):
    """What envcheck shows on a terminal COLUMNS wide, as lines."""
    command = " ".join([sys.executable, "-m", "envcheck"] + ["'%s'" % a for a in args])
    proc = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True,
                          cwd=ROOT, timeout=120,
                          env=dict(os.environ, COLUMNS=str(columns), LINES="50"))
    text = proc.stdout.decode("utf-8", "replace").replace("\r", "")
    return proc.returncode, text.splitlines()


@pytest.fixture(scope="module")
def hung_report(tmp_path_factory):
    """A run with known issues and a hang: every part of the screen has something."""
    d = tmp_path_factory.mktemp("screen")
    (d / "stuck.py").write_text(STUCK)
    report = d / "r.json"
    res = run_cli("run", "--nproc", "3", "-p", "serialization", "-p", "stuck",
                  "--probe-path", str(d / "stuck.py"), "--timeout", "3", "--json",
                  str(report), "-q")
    assert res.code == 1, res.stderr
    assert checks_by_id(load_report(report))["stuck.wait"]["outcome"] == "hang"
    return str(report)


@pytest.mark.parametrize("columns", [80, 120])
def test_the_run_screen_fits_the_terminal(hung_report, columns):
    code, lines = on_terminal(columns, "report", hung_report)
    assert code == 1
    too_wide = [line for line in lines if len(line) > columns]
    assert too_wide == []
    text = "\n".join(lines)
    assert "What to do:" in text and "ranks 0,2: waiting in barrier" in text
    if columns == 80:  # no room for a detail column: what did not pass says why below
        assert any(line.strip().startswith("rank 1: no progress for ") for line in lines)


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("args,code", [
    (["probes"], 0),
    (["check", "torch==2.4.1"], 0),
    # cu124 needs a newer driver than 470: "will not work", with the builds that would
    (["check", "torch==2.4.1+cu124", "--driver", "470.82.01", "--gpu", "sm_80"], 1),
    (["check", "--suggest"], 0),
])
def test_probes_and_check_fit_the_terminal(columns, args, code):
    got, lines = on_terminal(columns, *args)
    assert got == code, "\n".join(lines)
    assert [line for line in lines if len(line) > columns] == []
    assert len(lines) > 3


def test_a_pipe_keeps_whole_lines():
    res = run_cli("check", "torch==2.4.1+cu124", "--driver", "535.104.05", "--gpu", "sm_80")
    assert res.code == 0
    assert res.stdout.splitlines()[-1] == ("✓ 2.4.1+cu124 will work here: pip install "
                                           "torch==2.4.1 --index-url "
                                           "https://download.pytorch.org/whl/cu124")
