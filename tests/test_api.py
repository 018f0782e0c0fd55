"""envcheck as a library (envcheck/api.py): the CLI's answers, as data, printing nothing."""

import os

import pytest

from conftest import ROOT, run_cli
from envcheck import api
from envcheck.core.errors import UsageError

SAVED = os.path.join(ROOT, "tests", "data", "repeat-lossy.json")


def test_a_saved_report_reads_and_exits_as_envcheck_report_says(capsys):
    report = api.load_report(SAVED)
    code = api.exit_code(report)
    cli = run_cli("report", SAVED, "-q")
    assert int(code) == cli.code
    assert capsys.readouterr() == ("", "")  # the library never prints
    # Judged again with the built-in matrix: the same verdicts as it was saved with.
    again = api.load_report(SAVED, matrix_dirs=())
    assert [(c.id, c.verdict) for c in again.checks] == [(c.id, c.verdict)
                                                         for c in report.checks]


def test_judge_is_the_one_place_verdicts_are_set():
    report = api.load_report(SAVED)
    for c in report.checks:
        c.verdict = None
    api.judge(report, api.load_matrix())
    assert all(c.verdict for c in report.checks if c.outcome in ("passed", "failed"))


def test_bad_input_is_a_usage_error_not_a_print():
    with pytest.raises(UsageError, match="give either a saved report"):
        api.load_report()
    with pytest.raises(UsageError, match="--nproc 0: need at least 1 rank"):
        api.plan(api.RunOptions(nproc=0))


def test_check_summarize_and_explain_return_data():
    answer = api.check("torch==2.13.0", cuda="cpu", python_version="3.11", arch="x86_64",
                       glibc="2.36", driver=None)
    assert answer.answer is not None and answer.answer.works
    log = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-user-error.log")
    assert int(api.explain([log]).exit_code) == run_cli("explain", log).code == 0
    summary = api.summarize([SAVED])
    assert int(summary.exit_code) == run_cli("summary", SAVED).code == 1
    assert len(summary.records) == 3  # the saved run's three hosts
