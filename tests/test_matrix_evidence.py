"""The guards that keep the matrix true to its runs, in CI and without torch.

* Every committed evidence file (a healthy node's run on some release, trimmed by
  dev/observe.py) judged again with today's matrix reads fine: ``ok`` and ``known``, and
  ``unsupported`` only where the release's facts say so. A range narrower than the runs
  (``ddp-sync.out_of_step``: ``>=2.13`` while 2.3 does the same) fails here.
* Every check the probes declare has, on every release of releases.toml, an expectation
  backed by a run of that release or by a public source, or runs of that release that all
  skipped it. A new check, or a new release, fails here until it has been observed.

Both run on the built-in matrix, and on matrices made to be wrong, so that each is seen
failing: a narrowed range (38aebdc's ``out_of_step`` entry), a new check no run has seen,
an ``unsupported`` entry a release's own facts contradict.
"""

import json
import textwrap

import pytest

from conftest import run_cli
from envcheck.matrix import evidence, load as matrix_load


@pytest.fixture(scope="module")
def builtin():
    return matrix_load.load([])


@pytest.fixture(scope="module")
def runs(builtin):
    return evidence.load(builtin)


def write(directory, name, text):
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_evidence_covers_every_release_of_the_matrix(builtin, runs):
    """The sweep's runs are there: a 2-rank default-suite run of every release."""
    default = {ev.series for ev in runs if ev.run.get("nproc") == 2
               and "ddp-sync" in (ev.run.get("probes") or []) and not ev.run.get("model")}
    assert [r.series for r in builtin.releases if r.series not in default] == []


def test_every_committed_run_reads_fine_with_todays_matrix(builtin, runs):
    bad = [str(j) for ev in runs for j in evidence.wrongly_judged(ev, builtin)]
    assert bad == [], "%d check(s) of healthy runs judged wrong:\n%s" % (
        len(bad), "\n".join(bad))


def test_every_check_has_a_run_or_a_source_on_every_release(builtin, runs):
    cov = evidence.coverage(builtin, runs, evidence.catalog_checks())
    gaps = ["%s: %s" % (cid, evidence.spans(missing, builtin))
            for cid, missing in evidence.gaps(cov)]
    assert gaps == [], "checks without a run or a source on these releases:\n" + \
        "\n".join(gaps)



def test_the_repeat_checks_rest_on_a_run_of_every_release(builtin, runs):
    """The repeat probe's checks were swept (dev/observe.py --release all --variants
    repeat): each release's verdict rests on a run of it, not on a source alone."""
    ids = [c for c in evidence.catalog_checks() if c.startswith("repeat.")]
    assert ids == ["repeat.bandwidth", "repeat.collectives", "repeat.latency"]
    cov = evidence.coverage(builtin, runs, ids)
    not_run = ["%s on %s: %s" % (cid, s, c.kind or "gap") for cid, row in cov.items()
               for s, c in row.items() if c.kind != evidence.OBSERVED]
    assert not_run == []


# ---- the guards fail where they must ---------------------------------------------------

OUT_OF_STEP_AT_38AEBDC = """\
    [[expectation]]
    check = "ddp-sync.out_of_step"
    torch = ">=2.13"
    outcome = "failed"
    message = "rank \\\\d+ never reached DDP's setup"
    advice = "make every rank reach DDP's setup"
    source = "https://github.com/Lightning-AI/pytorch-lightning/issues/20536"
    observed = [
      {torch = "2.13.0+cpu", envcheck = "0.1.0", date = "2026-11-23", evidence = "../evidence/torch-2.13.0-cpu.json"},
    ]
"""


def _narrowed(tmp_path):
    """The built-in ddp-sync entries, with out_of_step's range as it was at 38aebdc."""
    builtin_file = matrix_load.BUILTIN_DIR + "/expectations/ddp-sync.toml"
    text = open(builtin_file, encoding="utf-8").read()
    head, sep, _ = text.partition("[[expectation]]\ncheck = \"ddp-sync.out_of_step\"")
    assert sep, "ddp-sync.toml no longer has its out_of_step entry"
    write(tmp_path, "expectations/ddp-sync.toml", head + textwrap.dedent(
        OUT_OF_STEP_AT_38AEBDC))
    # The file cites ../evidence/: the built-in runs, seen from here.
    (tmp_path / "evidence").symlink_to(matrix_load.BUILTIN_DIR + "/evidence")
    return matrix_load.load([str(tmp_path)])


def test_a_range_narrower_than_the_runs_fails_both_guards(tmp_path, runs):
    narrowed = _narrowed(tmp_path)
    wrong = [j for ev in runs for j in evidence.wrongly_judged(ev, narrowed)]
    seen = {(j.check, j.verdict) for j in wrong}
    assert seen == {("ddp-sync.out_of_step", "failure")}, seen
    series = {j.evidence.split("-")[1][:4] for j in wrong}
    assert "2.6." in series and "2.12" in series
    cov = evidence.coverage(narrowed, runs, ["ddp-sync.out_of_step"])
    assert [(c, evidence.spans(m, narrowed)) for c, m in evidence.gaps(cov)] == [
        ("ddp-sync.out_of_step", "1.13-2.12")]


def test_a_new_check_fails_coverage_until_observed(tmp_path, builtin, runs):
    probe = tmp_path / "mine.py"
    probe.write_text("CHECKS = ('works',)\n\ndef probe_mine(ctx):\n"
                     "    with ctx.check('works'):\n        pass\n")
    ids = evidence.catalog_checks([str(probe)])
    assert "mine.works" in ids
    cov = evidence.coverage(builtin, runs, ids)
    gaps = dict(evidence.gaps(cov))
    assert gaps == {"mine.works": tuple(r.series for r in builtin.releases)}
    res = run_cli("matrix", "--coverage", "--check", "mine", "--probe-path", str(probe),
                  "--no-pager", env={"COLUMNS": "80"})
    assert res.code == 1, res.stdout + res.stderr
    assert "error: mine.works has neither a run nor a source on torch 1.13-2.15" in res.stdout


def test_unsupported_only_where_the_release_says_so(tmp_path, builtin, runs):
    # torch 2.6 supports Python 3.11 (releases.toml): calling its DCP unsupported there
    # is a lie the guard must catch.
    write(tmp_path, "expectations/lie.toml", """\
        [[expectation]]
        check = "checkpoint.dcp_save_load"
        torch = "==2.6.*"
        python = ">=3.11"
        unsupported = true
        outcome = ["passed", "failed"]
        advice = "use another Python"
        source = "nowhere"
    """)
    lying = matrix_load.load([str(tmp_path)])
    assert "3.11" in lying.release("2.6.0").supported_pythons
    # A pass is fine whatever the entry; the guard only reads failures it turns into
    # 'unsupported'. So make the 2.6 run fail that check.
    ev = next(e for e in runs if e.name == "torch-2.6.0-cu124.json")
    data = json.loads(json.dumps(ev.data))
    data["checks"]["checkpoint.dcp_save_load"].update(
        outcome="failed", error_type="ValueError", message="mutable default")
    failing = evidence.Evidence(ev.name, ev.path, data)
    wrong = evidence.wrongly_judged(failing, lying)
    assert [(j.check, j.verdict) for j in wrong] == [("checkpoint.dcp_save_load",
                                                       "unsupported")]
    # The built-in unsupported entries (torch 1.13 on Python 3.11, torch < 2.3 with
    # NumPy 2) hold by the release's facts: their runs pass the guard.
    old = [e for e in runs if e.series in ("1.13", "2.0") and not e.data.get(
        "numpy", "").startswith("1.")]
    assert old and all(evidence.wrongly_judged(e, builtin) == [] for e in old)
    assert any(j.verdict == "unsupported" for e in old for j in evidence.rejudge(e, builtin))


def test_matrix_coverage_view(builtin):
    res = run_cli("matrix", "--coverage", "--no-pager", env={"COLUMNS": "80"})
    assert res.code == 0, res.stdout[-3000:] + res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0] == "Coverage: what each check's verdict rests on, by torch release " \
                       "(1.13-2.15)"
    row = next(line for line in lines if line.startswith("ddp-sync.out_of_step "))
    assert row.split()[1] == "1.13-2.15", row
    assert "Judged by a public source alone" in res.stdout
    assert "error:" not in res.stdout
    res = run_cli("matrix", "--check", "ddp-sync.out_of_step", "--torch", "2.6",
                  "--no-pager", env={"COLUMNS": "80"})
    assert res.code == 0, res.stdout + res.stderr
    assert "Coverage: what each check's verdict rests on, by torch release (2.6)" \
        in res.stdout
    res = run_cli("matrix", "--check", "nope.nothing")
    assert res.code == 2 and "--check nope.nothing: no such check or probe" in res.stderr
