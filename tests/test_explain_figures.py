"""dev/explain_figures.py: the held-out figures per batch and per family, from what was
recorded when each batch was measured (issue #34's closing table)."""

import os
import re
import subprocess
import sys

import test_explain_unseen as unseen
from conftest import ROOT

SCRIPT = os.path.join(ROOT, "dev", "explain_figures.py")


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_each_batch_reads_as_measured_and_the_families_add_up():
    proc = _run()
    assert proc.returncode == 0, proc.stderr
    rows = dict(re.findall(r"^\| (\d+) \| \d+ \| \d+ \| (\d+) \(", proc.stdout, re.M))
    expected = {4: unseen.BATCH4_MEASURED["right"], 5: unseen.BATCH5_MEASURED["right"],
                6: unseen.BATCH6_MEASURED["right"], 7: unseen.BATCH7_MEASURED["right"]}
    expected.update({b: v[2] for b, v in unseen.MEASURED_BATCHES.items()})
    assert {int(b): int(r) for b, r in rows.items()} == expected
    logs, right = map(int, re.search(r"^\| \*\*all\*\* \| (\d+) \| \| \*\*(\d+) ",
                                     proc.stdout, re.M).groups())
    assert right == sum(expected.values())
    families = re.findall(r"^\| ([\w.*() -]+) \| (\d+) \| (\d+) \|$", proc.stdout, re.M)
    assert sum(int(n) for _, n, _ in families) == logs
    assert sum(int(r) for _, _, r in families) == right
    # a cause no signature named when measured is never counted right
    assert [r for f, _, r in families if f.startswith("new.")] == ["0"]


def test_a_first_batch_after_the_last_is_one_line_and_exit_2():
    proc = _run("--from", "99")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no measured batch from 99 on" in proc.stderr.strip().splitlines()[-1]
