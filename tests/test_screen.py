"""The screen on a real terminal: every line fits at 80 and 120 columns, colour is there
and only there, and a run shows a live view.

Run under script(1), which gives envcheck a pseudo-terminal of its own, as a user's
terminal would; pipes and files keep the full layout and never carry an escape.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, STUCK, checks_by_id, load_report, run_cli
from terminal import (BOLD_RED, GREEN, RESET, SGR, YELLOW, on_terminal,
                      on_terminal_command, visible)

# One worker under xdist (--dist loadgroup), and a session-scoped run, so that the hung
# run its tests read is made once, not once per worker.
pytestmark = [pytest.mark.skipif(shutil.which("script") is None,
                                 reason="needs script(1) (util-linux) for a terminal"),
              pytest.mark.xdist_group("screen")]


@pytest.fixture(scope="session")
def hung_report(tmp_path_factory):
    """A run with known issues and a hang: every part of the screen has something."""
    d = tmp_path_factory.mktemp("screen")
    (d / "stuck.py").write_text(STUCK)
    report = d / "r.json"
    res = run_cli("run", "--nproc", "3", "-p", "serialization", "-p", "stuck",
                  "--probe-path", str(d / "stuck.py"), "--timeout", "8", "--json",
                  str(report), "-q")
    assert res.code == 1, res.stderr
    assert checks_by_id(load_report(report))["stuck.wait"]["outcome"] == "hang"
    return str(report)


@pytest.mark.ranks
@pytest.mark.parametrize("columns", [80, 120])
def test_the_run_screen_answers_first_and_fits_the_terminal_in_colour(hung_report, columns):
    code, lines, _ = on_terminal(columns, "report", hung_report)
    assert code == 1
    assert [line for line in lines if len(visible(line)) > columns] == []
    shown = [visible(line) for line in lines]
    # The answer, then what needs action in full, before the known issues.
    assert shown[0] == "✗ Not ready for distributed training: 1 FAILURE, 4 known issues"
    assert re.fullmatch(r"  backend gloo, 3 ranks on \S+", shown[1])
    assert shown[3:5] == ["Needs action:", "  ⧗ stuck.wait (FAILURE)"]
    assert "    ranks 0,2: waiting in barrier (distributed_c10d.py:" in "\n".join(shown)
    pitfalls = shown.index("Known torch pitfalls (4): what your code must avoid; -v: "
                           "advice, sources")
    assert shown[pitfalls + 1] == ("  ! serialization.pickle_default_group, pickle_subgroup: "
                                   "a process group cannot" + (
                                       "" if columns == 80 else " be pickled or copied: keep "
                                       "it out of"))
    assert re.fullmatch(r"1 FAILURE: 12 passed, 4 known issues, 1 hang in \d+\.\d s",
                        shown[-1])
    # A hang nobody expected fails the run: the answer, its entry and the last line are
    # bold red; a known issue is a yellow "!", a passed probe green.
    assert lines[0].startswith(BOLD_RED + "✗ Not ready")
    assert "  %s⧗%s stuck.wait (%sFAILURE%s)" % (BOLD_RED, RESET, BOLD_RED, RESET) in lines
    assert lines[pitfalls + 1].startswith("  " + YELLOW + "!" + RESET)
    assert next(line for line in lines if "setup " in line).startswith(GREEN + "✓" + RESET)
    assert lines[-1].startswith(BOLD_RED) and lines[-1].endswith(RESET)


@pytest.mark.ranks
@pytest.mark.parametrize("columns", [80, 120])
def test_verbose_shows_every_row_and_detail_and_fits_the_terminal(hung_report, columns):
    code, lines, _ = on_terminal(columns, "report", "-v", hung_report)
    assert code == 1
    assert [line for line in lines if len(visible(line)) > columns] == []
    text = "\n".join(visible(line) for line in lines)
    assert "What to do:" in text and "ranks 0,2: waiting in barrier" in text
    if columns == 80:  # no room for a detail column: each detail on lines of its own
        assert any(visible(line).strip().startswith("rank 1: no progress for ")
                   for line in lines)
        row = [visible(line) for line in lines].index(next(
            visible(line) for line in lines if visible(line).startswith("setup ")))
        # passed checks keep their detail too
        assert re.match(r" +\d\.\d\d s \(rank \d, slowest of 3", visible(lines[row + 1]))
    # A hang nobody expected fails the run: its row and the last line are bold red; a
    # known issue is yellow, a pass green.
    stuck = next(line for line in lines if visible(line).startswith("stuck "))
    assert BOLD_RED + "⧗ hang" + RESET in stuck and BOLD_RED + "FAILURE" + RESET in stuck
    known = next(line for line in lines if "pickle_default_group " in line)
    assert YELLOW + "✗ failed" + RESET in known and YELLOW + "known issue" + RESET in known
    passed = next(line for line in lines if "init_process_group " in line)
    assert GREEN + "✓ passed" + RESET in passed
    assert lines[-1].startswith(BOLD_RED) and lines[-1].endswith(RESET)
    assert "  %s⧗%s stuck.wait (%sFAILURE%s)" % (BOLD_RED, RESET, BOLD_RED, RESET) in lines
    assert text.index("stuck.wait (FAILURE)") < text.index("serialization.pickle_default")


@pytest.mark.ranks
@pytest.mark.parametrize("how", [{"env": {"NO_COLOR": "1"}}, {"flag": "--no-color"},
                                 {"env": {"TERM": "dumb"}}])
def test_no_color_and_no_color_flag_turn_colour_off(hung_report, how):
    args = ["report", hung_report] + ([how["flag"]] if "flag" in how else [])
    code, lines, _ = on_terminal(80, *args, env=how.get("env"))
    assert code == 1
    assert "stuck.wait (FAILURE)" in "\n".join(lines)
    assert [line for line in lines if "\x1b" in line] == []


@pytest.mark.ranks
def test_no_color_set_but_empty_keeps_colour(hung_report):
    # no-color.org: only a non-empty NO_COLOR turns colour off
    _, lines, _ = on_terminal(80, "report", hung_report, env={"NO_COLOR": ""})
    assert any(BOLD_RED in line for line in lines)


@pytest.mark.ranks
def test_json_junit_markdown_and_pipes_never_carry_an_escape(hung_report, tmp_path):
    for fmt in ("markdown", "json"):
        code, lines, _ = on_terminal(80, "report", hung_report, "--format", fmt,
                                  "--json", str(tmp_path / ("%s.json" % fmt)),
                                  "--junit", str(tmp_path / ("%s.xml" % fmt)))
        assert code == 1
        assert [line for line in lines if "\x1b" in line] == []
        assert "\x1b" not in (tmp_path / ("%s.json" % fmt)).read_text()
        assert "\x1b" not in (tmp_path / ("%s.xml" % fmt)).read_text()
    piped = run_cli("report", hung_report)
    assert piped.code == 1 and "stuck.wait (FAILURE)" in piped.stdout
    assert "\x1b" not in piped.stdout
    # A file: the table as a pipe gets it, whole lines, no colour.
    with open(tmp_path / "screen.txt", "w") as f:
        subprocess.run([sys.executable, "-m", "envcheck", "report", hung_report], stdout=f,
                       cwd=ROOT, env=dict(os.environ, TERM="xterm-256color"))
    assert (tmp_path / "screen.txt").read_text() == piped.stdout


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("args,code", [
    (["probes"], 0),
    (["check", "torch==2.4.1"], 0),
    # cu124 needs a newer driver than 470: "will not work", with the builds that would
    (["check", "torch==2.4.1+cu124", "--driver", "470.82.01", "--gpu", "sm_80"], 1),
    (["check", "--suggest"], 0),
])
def test_probes_and_check_fit_the_terminal(columns, args, code):
    got, lines, _ = on_terminal(columns, *args)
    assert got == code, "\n".join(lines)
    assert [line for line in lines if len(visible(line)) > columns] == []
    assert len(lines) > 3


@pytest.mark.parametrize("args", [
    ["check", "torch==2.4.1+cu124", "--driver", "470.82.01", "--gpu", "sm_80"],
    ["check", "--suggest", "--driver", "535.104.05", "--gpu", "sm_80"]])
def test_check_never_splits_a_pip_command_and_ends_with_the_reason(args):
    code, lines, _ = on_terminal(80, *args)
    shown = [visible(line) for line in lines]
    assert [line for line in shown if len(line) > 80] == []
    commands = [line.strip() for line in shown if "pip install" in line]
    assert commands and all(re.fullmatch(
        r"(\S+ +(\[\d+ known issues?\] +)?)?pip install torch==[\d.]+( --index-url "
        r"https://download\.pytorch\.org/whl/cu\d+)?( +\[\d+ known issues?\])?", c)
        for c in commands), commands
    assert not any(line.strip().startswith("https://") for line in shown)
    if code == 1:  # the fact that decided it stands next to the answer
        assert shown[-4] == "✗ 2.4.1+cu124 will not work here: driver 470.82.01 < 525.60.13 " \
                            "for cu124"
        assert shown[-1] == ("    pip install torch==2.4.1 --index-url "
                             "https://download.pytorch.org/whl/cu118")
        # one 80×50 screen, each known issue's line with its fix (test_vocabulary)
        assert len(shown) <= 50


@pytest.mark.parametrize("args", [
    ["check", "torch==2.4.1", "-v", "--driver", "535.104.05", "--gpu", "sm_80"],
    ["check", "torch==2.13.0", "-v", "--driver", "580.82.07", "--gpu", "sm_90"]])
def test_check_verbose_never_splits_a_url_or_a_path_at_80_columns(args):
    """Sources and advice wrap at spaces only: every URL, path and dotted name the pipe
    shows (whole lines) is whole on one line of the 80-column screen too."""
    code, lines, _ = on_terminal(80, *args)
    shown = [visible(line) for line in lines]
    piped = run_cli(*args)
    assert code == piped.code
    words = {w.strip("();,") for w in piped.stdout.split()
             if re.search(r"https?://|/|\w\.\w.*\.\w|--\w", w)}
    assert any(w.startswith("https://") for w in words), words
    for word in words:
        assert any(word in line for line in shown), word
    # what is longer than a line is a single word on a line of its own, never cut
    assert [line for line in shown if len(line) > 80 and " " in line.strip()] == []


def test_check_answers_in_colour_on_a_terminal_only():
    args = ["check", "torch==2.4.1+cu124", "--driver", "470.82.01", "--gpu", "sm_80"]
    _, lines, _ = on_terminal(120, *args)
    answer = next(line for line in lines if "will not work here" in line)
    assert answer.startswith(BOLD_RED + "✗ 2.4.1+cu124 will not work here")
    driver = next(line for line in lines if "driver" in visible(line)
                  and visible(line).startswith("  ✗"))
    assert driver.startswith("  " + BOLD_RED + "✗" + RESET)
    _, as_json, _ = on_terminal(120, *(args + ["--json"]))
    assert [line for line in as_json if "\x1b" in line] == []
    _, no_color, _ = on_terminal(120, *(args + ["--no-color"]))
    assert [line for line in no_color if "\x1b" in line] == []


def test_a_pipe_keeps_whole_lines():
    res = run_cli("check", "torch==2.4.1+cu124", "--driver", "535.104.05", "--gpu", "sm_80")
    assert res.code == 0
    assert res.stdout.splitlines()[-1] == ("✓ 2.4.1+cu124 will work here: pip install "
                                           "torch==2.4.1 --index-url "
                                           "https://download.pytorch.org/whl/cu124")


@pytest.mark.ranks
def test_a_run_shows_a_live_view_then_the_rows_a_pipe_shows():
    code, lines, raw = on_terminal(80, "run", "-p", "serialization", "-p", "launch")
    assert code == 0
    # The spinner line while torch imports (a rank takes seconds to import it, the view
    # redraws eight times a second), with the startup timeout it is judged by.
    assert re.search(r"starting ranks · \d+\.\d s of 120 s · [01]/2 ranks imported torch",
                     raw)
    # While it runs, a line per probe that finished, judged as the report will be: a
    # known issue in yellow, not a red failure.
    assert re.search(r"! serialization +5 passed, 4 known issues  \d+\.\d\d s",
                     SGR.sub("", raw))
    assert YELLOW + "!" + RESET + " serialization" in raw
    shown = [visible(line) for line in lines]
    # The view goes when the run ends: the screen is the pipe's, the answer first and the
    # same rows in the same order, setup's included (the footer counts its checks).
    assert shown[0].startswith("✓ Ready for distributed training: backend gloo, 2 ranks on ")
    piped = run_cli("run", "-p", "serialization", "-p", "launch")
    rows = [line for line in shown if re.match(r"[✓!✗⧗-] [\w-]+ +\d", line)]
    assert [r.split()[:2] for r in rows] == [
        r.split()[:2] for r in piped.stdout.splitlines() if re.match(r"[✓!✗⧗-] [\w-]+ +\d", r)
    ] == [["✓", "setup"], ["✓", "launch"], ["!", "serialization"]]
    assert next(line for line in lines if "serialization " in line and "passed" in line) \
        .startswith(YELLOW + "!" + RESET)
    assert re.fullmatch(r"nothing unexpected: 15 passed, 4 known issues, 3 skipped in "
                        r"\d+\.\d s", shown[-1])
    # --no-color keeps the live view (it says nothing is frozen), without a colour.
    _, plain, raw = on_terminal(80, "run", "-p", "launch", "--no-color")
    assert "starting ranks · " in raw and not SGR.search(raw)
    assert plain[0].startswith("✓ Ready for distributed training")
    _, quiet, raw = on_terminal(80, "run", "-p", "launch", "-q")
    assert "starting ranks" not in raw and "\x1b[?25l" not in raw  # no live view at all
    assert [visible(line) for line in quiet][0].startswith("✓ Ready for distributed training")
    # No live view: the report has a line per probe itself.
    assert re.fullmatch(r"✓ launch +3 passed, 3 skipped  \d+\.\d\d s",
                        visible(quiet[-3]))


@pytest.mark.ranks
def test_the_live_view_after_a_hang_says_the_probe_stopped_and_goes_on(tmp_path):
    (tmp_path / "stuck.py").write_text(STUCK + AFTER)
    code, lines, raw = on_terminal(80, "run", "--nproc", "3", "-p", "stuck", "-p", "after",
                                   "--probe-path", str(tmp_path / "stuck.py"),
                                   "--timeout", "5")
    assert code == 1
    shown = [visible(line) for line in lines]
    # While it runs, the probe that hung gets its line when fresh ranks start, and they
    # go on; then the screen, answer first.
    live = SGR.sub("", raw)
    assert "- stuck          stopped before it finished (see below)" in live
    assert YELLOW + "-" + RESET + " stuck" in raw
    assert re.search(r"✓ after +1 passed  \d+\.\d\d s", live)
    assert shown[0] == "✗ Not ready for distributed training: 1 FAILURE"
    assert re.search(r"probe stuck 1/2 · wait · 5\.\d s of 5 s: a hang; collecting stacks, "
                     r"restarting", raw)
    assert shown[-1].startswith("1 FAILURE: 8 passed, 1 hang in ")


@pytest.mark.ranks
def test_a_healthy_node_fits_one_screen_and_answers_first():
    # The whole default suite, as a user runs it first, in a terminal of 80 x 50.
    code, lines, _ = on_terminal(80, "run")
    assert code == 0
    shown = [visible(line) for line in lines]
    assert len(shown) <= 50, "\n".join(shown)
    assert [line for line in shown if len(line) > 80] == []
    # The live view goes when the run ends; the screen starts with the answer, and its
    # rows follow the environment, as in a pipe. A probe with nothing to check here says
    # it skipped: bandwidth (no other host), frameworks (none installed).
    answer = next(i for i, line in enumerate(shown) if "distributed training" in line)
    assert answer == 0, "\n".join(shown)
    rows = [line for line in shown if re.match(r"[✓!✗⧗-] [\w-]+ +\d", line)]
    assert rows[0].startswith("✓ setup ") and len(rows) == 10, "\n".join(shown)
    assert all(re.fullmatch(r"([✓!] [\w-]+ +\d+ passed|- (bandwidth|frameworks) +\d+ "
                            r"skipped).*  \d+\.\d\d s", line) for line in rows)
    assert re.fullmatch(r"✓ Ready for distributed training: backend gloo, 2 ranks on \S+",
                        shown[answer]), "\n".join(shown)
    assert re.fullmatch(r"  nothing unexpected; \d+ known torch pitfalls your code must "
                        r"avoid \(below\)", shown[answer + 1])
    assert "✗ failed" not in "\n".join(shown)
    assert re.fullmatch(r"nothing unexpected: \d+ passed, \d+ known issues, \d+ skipped in "
                        r"\d+\.\d s", shown[-1])


@pytest.mark.ranks
def test_one_unexpected_failure_shows_in_the_first_18_lines(tmp_path):
    (tmp_path / "ours.py").write_text(OURS)
    (tmp_path / "team" / "expectations").mkdir(parents=True)
    (tmp_path / "team" / "expectations" / "ours.toml").write_text(
        '[[expectation]]\ncheck = "ours.sums"\ntorch = ">=1.0"\noutcome = "passed"\n'
        'source = "our cluster, every week"\n')
    code, lines, _ = on_terminal(80, "run", "--probe-path", str(tmp_path / "ours.py"),
                                 "--matrix", str(tmp_path / "team"))
    assert code == 1
    shown = [visible(line) for line in lines]
    assert [line for line in shown if len(line) > 80] == []
    first = shown[:18]  # a line per probe of the live view (11 now), then the answer
    answer = first.index("✗ Not ready for distributed training: 1 UNEXPECTED, 7 known "
                         "issues")
    assert first[answer + 3:answer + 6] == [
        "Needs action:", "  ✗ ours.sums (UNEXPECTED)", "      the sums differ"], "\n".join(shown)
    assert lines[answer].startswith(BOLD_RED)
    assert re.fullmatch(r"1 UNEXPECTED: \d+ passed, \d+ known issues, 1 failed, \d+ skipped in "
                        r"\d+\.\d s", shown[-1])


OURS = '''
CHECKS = ("sums",)


def probe_ours(ctx):
    """a check our cluster expects to pass"""
    with ctx.check("sums") as c:
        c.fail("the sums differ")
'''


AFTER = '''

def probe_after(ctx):
    """runs after the hang, on fresh ranks"""
    with ctx.check("fine"):
        pass
'''


def test_the_matrix_goes_through_a_pager_on_a_terminal_only():
    code, lines, _ = on_terminal(80, "matrix", env={"PAGER": "sed s/^/paged:/"})
    assert code == 0 and len(lines) > 50
    assert all(visible(line).startswith("paged:") for line in lines if line.strip())
    _, unpaged, _ = on_terminal(80, "matrix", "--no-pager", env={"PAGER": "sed s/^/paged:/"})
    assert not any(line.startswith("paged:") for line in unpaged)
    # a screenful is not paged; a pipe never is
    _, short, _ = on_terminal(80, "matrix", "--torch", "2.4.1+cu124", "--check", "ddp-sync",
                              env={"PAGER": "sed s/^/paged:/"})
    assert not any(line.startswith("paged:") for line in short)
    assert not run_cli("matrix", env={"PAGER": "sed s/^/paged:/"}).stdout.startswith("paged:")
