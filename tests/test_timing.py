"""The report says where the time went: per attempt, per rank, per phase, read from the
ranks' own records — including across a hang, from the deadline to the fresh ranks."""

import pytest

from conftest import load_report, run_cli

PROBES = '''
CHECKS = {"stuck": ("wait",), "after": ("ran",)}


def probe_stuck(ctx):
    import time
    with ctx.check("wait"):
        if ctx.rank == 1:
            time.sleep(3600)


def probe_after(ctx):
    with ctx.check("ran") as c:
        c.detail = "ran"
'''

TIMEOUT = 2.0


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("timing")
    probes = tmp / "timing_probes.py"
    probes.write_text(PROBES)
    report = tmp / "r.json"
    result = run_cli("run", "--nproc", "3", "--probe-path", str(probes), "-p", "launch",
                     "-p", "stuck", "-p", "after", "--timeout", str(TIMEOUT), "--json",
                     str(report), "-q", timeout=300)
    assert result.code == 1, result.stdout + result.stderr
    return load_report(report)


@pytest.mark.ranks
def test_every_rank_has_its_phases_in_order(hung):
    first, second = hung["attempts"]
    assert sorted(first["timing"]["ranks"]) == ["0", "1", "2"]
    for rank, phases in first["timing"]["ranks"].items():
        names = [p["phase"] for p in phases]
        # Ranks 0 and 2 went on to the next probe and waited for rank 1 in the final
        # barrier (which never ended: no teardown phase).
        assert names == ["start", "environment", "rendezvous", "probe:launch",
                         "probe:stuck"] + (["probe:after"] if rank != "1" else []), names
        start = phases[0]
        # The run's head start began importing torch before the attempt started (its
        # "prepared"): the import is within that lead plus the start phase.
        lead = first["timing"]["started"] - first["timing"]["prepared"]
        assert 0 < start["import_torch_s"] <= lead + start["seconds"]
        ends = [p["start_s"] + p["seconds"] for p in phases[:-1]]
        # Each phase begins where the one before ended (records are the boundaries):
        # never before it (-0.002: both are rounded to the millisecond), and after it by
        # no more than the rank's own code between two records, which a busy machine
        # can stretch to a few scheduler slices (seen: > 2 ms under pytest -n 2)
        gaps = [round(p["start_s"] - end, 3) for end, p in zip(ends, phases[1:])]
        assert all(-0.002 <= gap < 0.05 for gap in gaps), (rank, gaps, phases)
    # The probe the hang ended has no end.
    assert first["timing"]["ranks"]["1"][-1]["seconds"] is None
    for phases in second["timing"]["ranks"].values():
        assert [p["phase"] for p in phases] == ["start", "environment", "rendezvous",
                                                "probe:after", "teardown"]
        assert phases[0]["forked"] is True  # by the next attempt's zygote


@pytest.mark.ranks
def test_the_hang_deadline_and_the_fresh_ranks_line_up(hung):
    first, second = hung["attempts"]
    abort = first["abort"]
    assert (abort["kind"], abort["root_rank"]) == ("hang", 1)
    stuck = first["timing"]["ranks"]["1"][-1]
    # The supervisor's deadline is the rank's own probe start plus the timeout, seen
    # after the rank wrote its record: never earlier (-0.002: the start and its offset
    # are each rounded to the millisecond).
    assert abort["deadline"] >= first["timing"]["started"] + stuck["start_s"] + TIMEOUT \
        - 0.002
    assert second["timing"]["started"] > abort["deadline"]
    # Rank 1 sat in one probe past a quarter of its timeout: the next attempt's zygote
    # began importing torch by then, before the deadline, not after it. (On a loaded
    # machine a slow import of torch in the first attempt can start it even earlier.)
    assert first["timing"]["started"] < second["timing"]["prepared"] < abort["deadline"]
    # The first attempt's zygote is the run's head start: importing torch before the
    # options were parsed, so before the attempt started.
    assert first["timing"]["prepared"] < first["timing"]["started"]
