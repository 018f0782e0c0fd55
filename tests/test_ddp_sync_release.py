"""ddp-sync waits for nothing: the rank DDP left waiting is released by the rank that
raised leaving the subgroup, not by the subgroup's timeout, and the ranks in step still
finish as they would have (at 3 ranks: rank 2 raises, rank 0 waits, rank 1 goes on, as
the committed evidence of torch 2.13 says)."""

import pytest

from conftest import checks_by_id, load_report, run_cli

pytestmark = pytest.mark.ranks  # every test here starts real ranks


def test_three_ranks_the_waiting_rank_is_released_by_the_one_that_raised(tmp_path):
    report = tmp_path / "r.json"
    result = run_cli("run", "--nproc", "3", "-p", "ddp-sync", "--json", str(report), "-q",
                     timeout=300)
    assert result.code == 0, result.stdout
    shapes = checks_by_id(load_report(report))["ddp-sync.mismatched_shapes"]
    assert shapes["verdict"] == "known"
    assert shapes["detail"] == (
        "DDP raised only on rank(s) 2 of 3 although rank 2 has a parameter of another "
        "shape; rank(s) 0 blocked in DDP's setup until it left; rank(s) 1 went on with no error")
    ranks = {r: e.get("data") or {} for r, e in shapes["ranks"].items()}
    assert ranks["0"]["ranks"] == {"raised": [2], "waited": [0], "went_on": [1]}
    # Rank 0 did not sit out the timeout: rank 2 left, and gloo said so.
    assert ranks["0"]["released_by_peer_leaving"] is True
    assert "Connection closed by peer" in ranks["0"]["message"]
    assert "released_by_peer_leaving" not in ranks["1"]
    assert "appears not to match" in ranks["2"]["message"]
