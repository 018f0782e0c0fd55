"""A partial report says "?" for what it did not learn, never a false fact.

A run stopped by Ctrl-C while its ranks still import torch has learned nothing of the
environment: its header must not say "numpy not installed", "no nvidia-smi" or "none
visible to torch" about a machine whose ranks simply had not reported yet.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, run_cli

pytestmark = pytest.mark.ranks  # every test here starts real ranks


def test_ctrl_c_during_startup_says_question_marks_not_false_facts(tmp_path):
    report = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "run", "-q", "--json",
                             str(report)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    time.sleep(1.0)  # envcheck is up; its ranks are still importing torch (seconds)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    data = json.loads(report.read_text())
    assert data["interrupted"] == "SIGINT"
    if data["environment"]:
        pytest.skip("the ranks reported before the signal landed: not a startup stop")
    for screen in (out, run_cli("report", str(report)).stdout):
        header = dict(line.split(None, 1) for line in screen.splitlines()
                      if line.startswith(("numpy ", "driver ", "GPUs ")))
        assert header == {"numpy": "?", "driver": "?", "GPUs": "?"}, screen
        assert "CUDA / cuDNN / NCCL  ? / ? / ?" in screen
        assert "not installed" not in screen and "no nvidia-smi" not in screen
