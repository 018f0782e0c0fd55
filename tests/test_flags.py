"""One set of flags on every command that prints: run, report, check, summary, explain.

The same ``--format`` values (text, json; markdown where there is a markdown form), and
``-q``, ``-v``, ``--no-color``, ``--json PATH`` on each; where one has nothing to do
(``check -q``: no live view), it is accepted and its help says so, and ``--format
markdown`` where there is none is one line naming the commands that have it.
"""

import json
import os

import pytest

from conftest import ROOT, run_cli

COMMANDS = ("run", "report", "check", "summary", "explain")
LOG = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-pickle-group.log")
NODE = ("--driver", "535.104.05", "--gpu", "sm_80", "--python-version", "3.11")


def options(command):
    import typer

    from envcheck.cli import app

    group = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_the_same_flags(command):
    params = options(command)
    flags = {opt for p in params.values() for opt in p.opts}
    assert {"-q", "--quiet", "-v", "--verbose", "--no-color", "--json", "--format"} <= flags
    fmt = params["fmt"]
    assert fmt.default == "text"
    assert fmt.metavar == ("text|json|markdown" if command in ("run", "report")
                           else "text|json")


@pytest.mark.parametrize("command, args", [
    ("check", ("torch==2.4.1",) + NODE),
    ("summary", (LOG,)),
    ("explain", (LOG,)),
])
def test_markdown_where_there_is_none_is_one_line(command, args):
    res = run_cli(command, *args, "--format", "markdown")
    assert res.code == 2 and res.stdout == ""
    assert res.stderr == ("envcheck: error: --format markdown: envcheck %s has no markdown "
                          "form (run and report have one, for $GITHUB_STEP_SUMMARY); choose "
                          "text or json\n" % command)


@pytest.fixture(scope="module")
def saved_report(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "r.json"
    res = run_cli("run", "-q", "-p", "launch", "--json", str(path), "--format", "text")
    assert res.code == 0, res.stderr
    return str(path)


@pytest.mark.ranks
def test_report_takes_text_and_its_old_name_table(saved_report):
    text = run_cli("report", saved_report, "--format", "text")
    table = run_cli("report", saved_report, "--format", "table")
    default = run_cli("report", saved_report, "-q", "--no-color")
    assert text.code == table.code == default.code == 0, text.stderr
    assert text.stdout == table.stdout == default.stdout
    assert "Ready for distributed training" in text.stdout


@pytest.mark.parametrize("command, args", [
    ("check", ("torch==2.4.1",) + NODE),
    ("explain", (LOG,)),
])
def test_quiet_and_no_color_change_nothing_where_there_is_nothing_to_quiet(command, args):
    plain = run_cli(command, *args)
    quiet = run_cli(command, *args, "-q", "--no-color")
    assert plain.code == quiet.code and plain.stderr == quiet.stderr == ""
    assert plain.stdout == quiet.stdout and plain.stdout


def test_explain_writes_its_json_with_the_same_option_as_the_others(tmp_path):
    out = tmp_path / "explain.json"
    res = run_cli("explain", LOG, "--json", str(out), "-v")
    printed = run_cli("explain", LOG, "--format", "json")
    assert res.code == printed.code == 0, res.stderr
    assert "1 cause found" in res.stdout
    saved, shown = json.loads(out.read_text()), json.loads(printed.stdout)
    assert saved["findings"] == shown["findings"] and saved["findings"]


def test_report_on_a_check_answer_points_at_summary(tmp_path):
    answer = tmp_path / "node17.json"
    res = run_cli("check", "torch==2.4.1", *NODE, "--json", str(answer))
    assert res.code == 0, res.stderr
    res = run_cli("report", str(answer))
    assert (res.code, res.stdout) == (2, "")
    assert res.stderr == ("envcheck: error: %s is an 'envcheck check' answer, not a run "
                          "report: show it with envcheck summary %s\n" % (answer, answer))


@pytest.mark.parametrize("command", ("run", "report", "check", "summary", "explain",
                                     "matrix", "probes"))
def test_help_fits_one_80_by_50_screen(command):
    res = run_cli(command, "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert res.code == 0
    lines = res.stdout.splitlines()
    assert len(lines) <= 50, res.stdout


@pytest.mark.ranks
def test_run_help_all_has_the_advanced_options_plain_help_leaves_out():
    env = {"COLUMNS": "80", "TERM": "dumb"}
    plain = run_cli("run", "--help", env=env).stdout
    every = run_cli("run", "--help-all", env=env).stdout
    advanced = ("--startup-timeout", "--probe-path", "--min-busbw", "--master-port")
    for option in advanced:
        assert "  %s " % option not in plain and "  %s " % option in every, option
    assert "--help-all" in plain and "--help-all" not in every
    # left out of the help, not out of the command
    res = run_cli("run", "-p", "launch", "--master-port", "29511", "--startup-timeout", "200",
                  "-q", "--format", "json")
    assert res.code == 0, res.stderr
