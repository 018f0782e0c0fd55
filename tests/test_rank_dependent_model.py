"""No hang of envcheck's own making: a ``--model`` whose shapes depend on the rank.

A training script with such a model fails in a second or two: DDP raises on the rank
whose shapes differ, that rank exits, and its peer, blocked in DDP's setup, is released
("Connection closed by peer"). envcheck's probes cannot exit, so each must settle a
rank's error before its next collective; before, ``serialization.ddp_wrap`` recorded the
error on rank 1 and waited in envcheck's own all_gather while rank 0 sat in DDP's setup:
a 60 s "hang UNEXPECTED" blamed on rank 0, which only waited.

One real 2-rank run gives every probe that takes the model (and those that do not) the
same rank-dependent model.
"""

import pytest

from conftest import checks_by_id, load_report, run_cli

RANK_DEPENDENT = '''
import torch


def build(rank=0):
    # Rank 1's layer is wider: what a rank-dependent config does.
    return torch.nn.Linear(4, 4 + rank)
'''

DDP_WRAP = ("rankdep.py:build's parameters differ across ranks; DDP(model) raised on "
            "rank(s) 1 of 2: [1]: params[0] in this process with sizes [5, 4] appears not "
            "to match sizes of the same param in process 0.; rank(s) 0 blocked in DDP's "
            "setup until the rank that raised left (a rank that exits on the error "
            "releases them; one that catches it and lives on leaves them waiting)")


@pytest.fixture(scope="module")
def rank_dependent_run(tmp_path_factory):
    where = tmp_path_factory.mktemp("rankdep")
    (where / "rankdep.py").write_text(RANK_DEPENDENT)
    report = where / "r.json"
    # --timeout 60 (the default) made explicit: a hang would cost the whole of it.
    result = run_cli("run", "-q", "--json", str(report), "--timeout", "60",
                     "-p", "collectives", "-p", "serialization", "-p", "checkpoint",
                     "-p", "ddp-sync", "--model", "rankdep.py:build", cwd=str(where),
                     timeout=400)
    return result, load_report(report)


@pytest.mark.ranks
def test_no_probe_hangs_or_crashes(rank_dependent_run):
    result, data = rank_dependent_run
    bad = {c["id"]: c["outcome"] for c in data["checks"] if c["outcome"] in ("hang", "crash")}
    assert bad == {}
    # A probe that broke outside its checks reports PROBE.run: none did.
    assert [c["id"] for c in data["checks"] if c["check"] == "run"] == []
    assert result.code == 1  # the user's model cannot be wrapped in DDP: that is news
    # The other probes say what the model does to them. Collectives and ddp-sync do not
    # take the model: untouched by it.
    checks = checks_by_id(data)
    assert {c["id"]: c["outcome"] for c in data["checks"] if c["probe"] == "collectives"} \
        == {"collectives." + n: "passed" for n in (
            "init", "all_reduce", "broadcast", "all_gather", "all_gather_object", "barrier")}
    assert checks["ddp-sync.extra_parameter"]["outcome"] == "passed"
    # Per-rank files hold each rank's own model; DCP's load says where the shapes differ.
    assert checks["checkpoint.save_load"]["outcome"] == "passed"
    dcp = checks["checkpoint.dcp_save_load"]
    assert dcp["outcome"] == "failed"
    assert "Size mismatch between saved torch.Size([5]) and current: torch.Size([4])" \
        in dcp["error"]["message"]


@pytest.mark.ranks
def test_ddp_wrap_names_the_rank_that_raised_and_the_one_that_waited(rank_dependent_run):
    _, data = rank_dependent_run
    checks = checks_by_id(data)
    wrap = checks["serialization.ddp_wrap"]
    assert (wrap["outcome"], wrap["verdict"]) == ("failed", "unexpected")
    assert wrap["error"]["message"] == DDP_WRAP
    # The same words on both ranks: the verdict is the job's.
    assert {r: e["error"]["message"] for r, e in wrap["ranks"].items()} == {"0": DDP_WRAP,
                                                                          "1": DDP_WRAP}
    assert wrap["ranks"]["0"]["data"]["ranks"] == {"raised": [1], "waited": [0],
                                                   "went_on": []}
    assert wrap["ranks"]["0"]["data"]["released_by_peer_leaving"] is True
    for name in ("deepcopy_ddp", "deepcopy_ddp_module", "fresh_load_state_dict",
                 "pickle_ddp"):
        assert checks["serialization." + name]["outcome"] == "skipped"
    assert checks["serialization.model"]["outcome"] == "passed"
