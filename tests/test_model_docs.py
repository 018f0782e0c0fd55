"""docs/model.md's examples, run as written: the model file a user copies, the screen
envcheck prints for it, and the EMA script the page says to use instead.

A copied example that fails (the page once showed the model without its forward, and
envcheck then blamed "building a fresh copy" for the missing forward) is a bug of the
page: these tests read the code blocks out of the page itself.
"""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli

pytestmark = pytest.mark.ranks

PAGE = os.path.join(ROOT, "docs", "model.md")
OBSERVED = os.path.join(ROOT, "dev", "models", "mymodels", "stdit.py")


def _blocks():
    with open(PAGE, encoding="utf-8") as f:
        return re.findall(r"```(?:python)?\n(.*?)```", f.read(), re.S)


def _block(first_line):
    (found,) = [b for b in _blocks() if b.startswith(first_line)]
    return found


def _words(text):
    return " ".join(text.split())


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    where = tmp_path_factory.mktemp("docs-model")
    (where / "mymodels").mkdir()
    (where / "mymodels" / "__init__.py").write_text("")
    (where / "mymodels" / "stdit.py").write_text(_block("# mymodels/stdit.py\n"))
    (where / "ema.py").write_text(_block("# ema.py: "))
    return where


def test_the_pages_model_is_the_one_the_matrix_observed():
    # The model dev/observe.py runs on every release, minus its docstring.
    with open(OBSERVED, encoding="utf-8") as f:
        observed = f.read()
    body = observed[observed.index('"""', 3) + 4:].lstrip("\n")
    assert _block("# mymodels/stdit.py\n") == "# mymodels/stdit.py\n" + body


def test_the_pages_screen_is_what_envcheck_prints_for_that_model(project):
    (screen,) = [b for b in _blocks() if b.startswith("$ envcheck run -p serialization")]
    shown = screen.split("\n", 1)[1]
    result = run_cli("run", "-p", "serialization", "--model", "mymodels.stdit:build_model",
                     cwd=str(project), timeout=300)
    assert result.code == 0, result.stdout + result.stderr
    # The page shows 80 columns; a pipe gets 100: the same words, wrapped elsewhere.
    assert _words(result.stdout).startswith(_words(shown)), result.stdout


def test_the_pages_ema_script_runs_as_written_and_prints_what_the_page_says(project):
    (said,) = [b for b in _blocks() if b.startswith("$ torchrun --nproc-per-node 2 ema.py")]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", "ema.py"], cwd=str(project), env=env,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = proc.stdout.splitlines()
    for line in said.splitlines()[1:]:
        assert line in printed, (line, printed)
        assert line.replace("rank 0", "rank 1") in printed  # and the same on rank 1
