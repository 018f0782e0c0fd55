"""One vocabulary for outcomes and verdicts, one truncation rule, ranks named as sets."""

import re

import pytest

from envcheck.core.outcomes import Outcome, Verdict
from envcheck.core.text import cut, first_line, rank_set, shorten
from envcheck.render import vocabulary
from envcheck.report.model import CheckResult
from envcheck.render.table import verdict_summary


def test_every_outcome_and_verdict_has_a_word_glyph_and_colour():
    assert set(vocabulary.OUTCOMES) == {o.value for o in Outcome}
    # Every verdict core names renders; "unsupported" (issue #17) is ready before it.
    assert {v.value for v in Verdict} <= set(vocabulary.VERDICTS)
    for v in Verdict:
        word = vocabulary.VERDICTS[v.value]
        # A verdict that fails the run shouts and is red, as pytest's FAILED.
        assert (word.word.isupper() and word.style == "bold red") == v.is_bad, v


def test_the_summary_line_uses_the_table_words():
    class R:
        checks = [CheckResult("p", "a", "failed", verdict="failure"),
                  CheckResult("p", "b", "failed", verdict="failure"),
                  CheckResult("p", "c", "hang", verdict="unexpected"),
                  CheckResult("p", "d", "failed", verdict="known"),
                  CheckResult("p", "e", "passed", verdict="new")]
    assert verdict_summary(R) == "1 UNEXPECTED, 2 FAILURES, 1 known issue"
    R.checks = R.checks[3:]
    assert verdict_summary(R, strict=True) == \
        "nothing unexpected, 1 known issue (failing under --strict)"


def test_a_probes_own_verdict_is_told_by_its_message_alone():
    assert vocabulary.error_line({"type": "CheckFailed", "message": "3 ranks differ"}) == \
        "3 ranks differ"
    assert vocabulary.error_line({"type": "RuntimeError", "message": "boom"}) == \
        "RuntimeError: boom"


@pytest.mark.parametrize("text,limit,expected", [
    ("short", 10, "short"),
    # a word boundary in the last third: cut there
    ("cannot pickle the ProcessGroup object", 24, "cannot pickle the…"),
    # none: cut mid-word (a long path), still with the ellipsis
    ("/very/long/path/without/any/space/at/all", 12, "/very/long/…"),
    ("a,  b;  c", 100, "a,  b;  c"),
])
def test_one_truncation_rule(text, limit, expected):
    assert cut(text, limit) == expected
    assert len(cut(text, limit)) <= limit


def test_shorten_collapses_whitespace_and_first_line_keeps_one_line():
    assert shorten("a\n  b\tc", 10) == "a b c"
    assert first_line("\n  Error: disk full\ntraceback...") == "Error: disk full"
    long = "RuntimeError: " + "x" * 300
    assert first_line(long) == "RuntimeError: " + "x" * 185 + "…"


@pytest.mark.parametrize("ranks,expected", [
    ([2], "rank 2"), ([0, 2], "ranks 0,2"), ([0, 1], "ranks 0,1"),
    ([3, 0, 1, 2], "ranks 0–3"), ([0, 1, 2, 3, 6, 7], "ranks 0–3,6,7"),
    (["5", "6", "7", "1"], "ranks 1,5–7"),
])
def test_rank_sets(ranks, expected):
    assert rank_set(ranks) == expected


LONG = '''
WORDS = " ".join("word%d" % i for i in range(80))


def probe_long(ctx):
    """every rank fails both checks with a long message"""
    with ctx.check("raises"):
        raise ValueError("the value was wrong: " + WORDS)
    with ctx.check("fails") as c:
        c.fail("the probe saw a mismatch: " + WORDS)
    with ctx.check("escapes"):
        raise RuntimeError("\\x1b[31mred from a library\\x1b[0m and a bell\\x07")
'''


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """Four ranks failing the same way: the shape where identical lines repeat."""
    from conftest import load_report, run_cli

    d = tmp_path_factory.mktemp("long")
    (d / "long.py").write_text(LONG)
    res = run_cli("run", "--nproc", "4", "-p", "long", "--probe-path", str(d / "long.py"),
                  "--format", "markdown", "--json", str(d / "r.json"), "--junit",
                  str(d / "r.xml"), "-q")
    assert res.code == 1, res.stderr
    return res, load_report(d / "r.json"), (d / "r.xml").read_text(), d


@pytest.mark.ranks
def test_a_long_detail_is_cut_at_a_word_with_an_ellipsis(long_run):
    from conftest import checks_by_id

    _, report, _, _ = long_run
    raised = checks_by_id(report)["long.raises"]
    message = "the value was wrong: " + " ".join("word%d" % i for i in range(80))
    assert raised["error"]["message"] == message  # the whole text stays in the JSON
    assert report["environment"]["frameworks"] == {}  # none in envcheck's own venv
    detail = raised["detail"]
    assert detail.endswith("…") and len(detail) <= 200
    kept = detail[:-1]
    assert message.startswith(kept) and message[len(kept)] == " "  # a whole word


@pytest.mark.ranks
def test_identical_ranks_are_one_line_and_no_internal_type_shows(long_run):
    res, report, junit, d = long_run
    host = report["ranks"][0]["host"]
    md = res.stdout
    assert md.count("  - ranks 0–3 on %s: failed\n" % host) == 3  # one per check
    assert "rank 0 on" not in md and "rank 3 on" not in md
    assert "CheckFailed" not in md and "CheckFailed" not in junit
    from conftest import run_cli

    table = run_cli("report", "-v", str(d / "r.json")).stdout
    assert "CheckFailed" not in table
    # A rank's own escapes: kept in the JSON, never on a screen.
    from conftest import checks_by_id

    raised = checks_by_id(report)["long.escapes"]["error"]["message"]
    assert raised == "\x1b[31mred from a library\x1b[0m and a bell\x07"
    # ... shown escaped (core.text.printable), so that nothing is hidden either
    assert "\\x1b[31mred from a library\\x1b[0m and a bell\\x07" in table
    assert "\x1b" not in table
    assert "\x1b" not in md and "\x07" not in md and "\\x1b[31mred from a library" in md
    assert "  ✗ long.fails (FAILURE)\n      the probe saw a mismatch: word0 word1" in table


@pytest.mark.ranks
def test_setup_times_agree_with_the_time_column(long_run):
    from conftest import checks_by_id

    _, report, _, d = long_run
    imported = checks_by_id(report)["setup.import_torch"]
    per_rank = {int(r): e["seconds"] for r, e in imported["ranks"].items()}
    slowest = max(per_rank, key=per_rank.get)
    assert imported["seconds"] == per_rank[slowest]
    assert imported["detail"] == "%.2f s (rank %d, slowest of 4; fastest %.2f s)" % (
        per_rank[slowest], slowest, min(per_rank.values()))
    from conftest import run_cli

    row = next(line for line in run_cli("report", "-v", str(d / "r.json")).stdout.splitlines()
               if " import_torch " in line)
    t = "%.2f" % per_rank[slowest]
    assert re.search(r" %ss +%s s \(rank %d, " % (re.escape(t), re.escape(t), slowest), row)


def test_ranks_on_several_hosts_are_named_by_host():
    from envcheck.core.text import parse_rank_numbers, rank_numbers
    from envcheck.run.merge import name_hosts

    assert parse_rank_numbers(rank_numbers([0, 1, 2, 3, 6, 8, 9])) == [0, 1, 2, 3, 6, 8, 9]
    where = {0: "node-a", 1: "node-a", 2: "node-a", 3: "node-b", 4: "node-b", 5: "node-b"}
    grouped = CheckResult("p", "c", "failed", detail="ranks 0–2,4: boom", root_rank=0)
    single = CheckResult("p", "c", "hang", detail="rank 4: no progress", root_rank=4)
    bare = CheckResult("p", "c", "crash", detail="exited with code 1", root_rank=5)
    name_hosts([grouped, single, bare], where)
    assert grouped.detail == "ranks 0–2 on node-a; 4 on node-b: boom"
    assert single.detail == "rank 4 on node-b: no progress"
    assert bare.detail == "rank 5 on node-b: exited with code 1"


# ---- a known issue in one line: a whole clause that says what to do -------------------

def _matrix_advice():
    from envcheck.matrix.load import load

    seen = {}
    for e in load().expectations:
        if e.advice and e.advice not in seen.values():
            seen[", ".join(e.checks) + " #%d" % e.where.index] = e.advice
    return seen


def test_long_asides_go_whole_and_calls_stay():
    assert vocabulary.without_asides(
        "do X (launch before building models and trainers), torch.save(m.state_dict(), p) "
        "(unconfirmed)") == "do X, torch.save(m.state_dict(), p) (unconfirmed)"


def test_clauses_are_never_cut_inside_brackets_or_quotes():
    assert vocabulary.clauses("a (b: c; d) e: 'f: g' h; {k: v}. x") == [
        ("a (b: c; d) e", ": "), ("'f: g' h", "; "), ("{k: v}", ". "), ("x", "")]
    # an apostrophe inside a word opens no quote
    assert vocabulary.clauses("rank 0's copy: fix") == [("rank 0's copy", ": "), ("fix", "")]


@pytest.mark.parametrize("check, gist", [
    ("ddp-sync.out_of_step",
     "make every rank reach DDP's setup in the same order, and pass timeout= to "
     "init_process_group so that a rank out of step ends in an error instead of a wait of "
     "the default timeout"),
    ("ddp-sync.mismatched_shapes",
     "DDP detects a shape mismatch only on the rank whose shapes differ: make every rank "
     "build the same model, and debug with TORCH_DISTRIBUTED_DEBUG=DETAIL"),
    ("fsdp.gradient_divide",
     "TorchTitan's gradient reduction makes FSDP2 reduce-scatter with "
     "ReduceOp.PREMUL_SUM, which gloo lacks: on gloo also call "
     "set_force_sum_reduction_for_comms(True) on every FSDP module, or train on GPUs (NCCL "
     "has PREMUL_SUM)"),
    ("fsdp.subgroup",
     "on torch 2.3 and 2.4, dcp.save/dcp.load with process_group= a subset of the ranks "
     "fails on the group's own ranks: checkpoint with the default group (every rank), or "
     "use torch >= 2.5"),
])
def test_the_pitfalls_the_first_hour_met_keep_their_fix(check, gist):
    (advice,) = {a for k, a in _matrix_advice().items() if k.split(" #")[0] == check}
    assert vocabulary.advice_gist(advice) == gist


def test_every_pitfall_line_is_whole_and_keeps_the_fix_a_colon_introduces():
    for where, advice in _matrix_advice().items():
        gist = vocabulary.advice_gist(advice)
        for o, c in ("()", "[]", "{}"):
            assert gist.count(o) == gist.count(c), (where, gist)
        assert gist.count("'") % 2 == 0 or "'s " in gist, (where, gist)
        parts = vocabulary.clauses(advice.split("\n")[0])
        fixes = [parts[i + 1][0] for i, (_, sep) in enumerate(parts) if sep == ": "]
        if fixes:  # what follows the first colon says what to do: it is on the line
            assert gist.endswith(vocabulary.without_asides(fixes[0].rstrip("."))), \
                (where, gist)
        assert len(gist) < 260, (where, gist)  # a line, not the advice: -v has that
