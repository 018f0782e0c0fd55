"""The screens in README.md and docs/screens.md are what envcheck really prints.

dev/screens.py writes them from real runs in an 80-column pseudo-terminal; here each
command runs again and the structure of its screen (probe rows, headings and their
counts, each known issue's checks, the answer, the last line) must be the sample's.
A sample typed by hand, or left behind by a change to a screen, fails.
"""

import os
import shutil
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "dev"))
import screens  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("script") is None,
                                reason="needs script(1) (util-linux) for a terminal")


@pytest.mark.ranks
def test_every_sample_has_the_structure_of_a_real_run():
    assert screens.regenerate(check_only=True) == []


def test_every_command_has_a_screen_explain_included():
    commands = {s.command.split()[1] for s in screens.SCREENS}
    assert {"run", "check", "summary", "explain", "probes"} <= commands
    for doc in ("README.md", "docs/screens.md"):
        assert {s.command.split()[1] for s in screens.SCREENS if s.doc == doc} >= {
            "run", "check", "summary", "explain"}


def _sample(doc, heading, command):
    screen = screens.Screen(doc, heading, command, None)
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = f.read()
    start, end = screens.find(text, screen)
    return text[start:end].splitlines()


def test_a_sample_that_says_another_count_or_row_differs():
    sample = _sample("README.md", "# envcheck", "envcheck run")
    assert screens.differences(sample, sample) == []
    # "7 known torch pitfalls" on one line and "6 known issues" on the last: the
    # first hour's README
    miscounted = [line.replace("; 7 known torch pitfalls", "; 6 known torch pitfalls")
                  for line in sample]
    assert screens.differences(sample, miscounted) == [
        "-  nothing unexpected; 7 known torch pitfalls your code must avoid (below)",
        "+  nothing unexpected; 6 known torch pitfalls your code must avoid (below)"]
    no_hosts_row = [line for line in sample if not line.startswith("✓ hosts ")]
    assert screens.differences(sample, no_hosts_row) == ["-row ✓ hosts 4 passed, 1 skipped"]
    cut = [line.split(": ", 1)[0] + ":" if line.startswith("  ! ddp-sync.out_of_step")
           else line for line in sample]
    assert screens.differences(sample, cut) == [], "a wording, not the structure"
