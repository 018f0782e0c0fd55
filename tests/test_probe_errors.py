"""A probe that raises a BaseException subclass fails its check; the rank lives on.

torch derives some errors from BaseException itself (DCP's CheckpointException, 2.0 to
2.13 at least). Catching only Exception let such an error kill the rank: "rank 1 exited
with code 1" and every later check of the probe gone from the table. One real 3-rank run.
"""

import pytest

from conftest import checks_by_id, load_report, run_cli

PROBES = '''
class CheckpointLikeError(BaseException):
    """Shaped like torch's CheckpointException: a BaseException, not an Exception."""


def probe_dies_hard(ctx):
    with ctx.check("inside") as c:
        if ctx.rank == 1:
            raise CheckpointLikeError("planner failed on rank %d" % ctx.rank)
        c.detail = "rank %d saved" % ctx.rank
    with ctx.check("after") as c:
        c.detail = "still running on rank %d" % ctx.rank


def probe_dies_outside(ctx):
    raise CheckpointLikeError("outside any check")
'''


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("baseexc")
    path = folder / "probes.py"
    path.write_text(PROBES)
    report = folder / "report.json"
    result = run_cli("run", "--probe-path", str(path), "-p", "dies_hard", "-p", "dies_outside",
                     "-p", "collectives", "-n", "3", "--json", str(report), "-v",
                     env={"COLUMNS": "200"})
    return result, checks_by_id(load_report(str(report)))


@pytest.mark.ranks
def test_base_exception_in_a_check_fails_that_check_on_its_rank(run):
    result, checks = run
    assert result.code == 1, result.stdout + result.stderr
    inside = checks["dies-hard.inside"]
    assert inside["outcome"] == "failed"
    assert inside["error"]["type"].endswith("CheckpointLikeError")
    assert inside["detail"] == "rank 1: planner failed on rank 1"
    assert inside["ranks"]["1"]["outcome"] == "failed"
    assert inside["ranks"]["0"]["outcome"] == "passed"
    assert inside["ranks"]["2"]["outcome"] == "passed"


@pytest.mark.ranks
def test_the_rank_lives_on_to_the_next_check_and_probe(run):
    result, checks = run
    after = checks["dies-hard.after"]
    assert after["outcome"] == "passed"
    assert after["ranks"]["1"]["detail"] == "still running on rank 1"
    # The probe after it ran on every rank: nothing crashed.
    assert checks["collectives.all_reduce"]["outcome"] == "passed"
    assert "exited with code" not in result.stdout + result.stderr


@pytest.mark.ranks
def test_base_exception_outside_a_check_fails_the_probe_run(run):
    result, checks = run
    outside = checks["dies-outside.run"]
    assert outside["outcome"] == "failed"
    assert outside["detail"] == "CheckpointLikeError: outside any check"
    assert sorted(r for r, e in outside["ranks"].items() if e["outcome"] == "failed") == [
        "0", "1", "2"]
    assert [line.split()[:3] for line in result.stdout.splitlines()
            if line.startswith("dies-hard ")] == [["dies-hard", "inside", "✗"],
                                                  ["dies-hard", "after", "✓"]]
