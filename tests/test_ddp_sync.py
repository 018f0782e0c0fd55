"""ddp-sync at the world sizes users run: the verdict is the job's, the same words on every
rank, and a healthy machine exits 0 whatever the number of ranks."""

import pytest

from conftest import checks_by_id, load_report, run_cli

pytestmark = pytest.mark.ranks  # every test here starts real ranks

SHAPES_2 = ("DDP raised only on rank(s) 1 of 2 although rank 1 has a parameter of another "
            "shape; rank(s) 0 blocked in DDP's setup until it left")
OUT_OF_STEP_2 = ("rank 1 never reached DDP's setup: rank(s) 0 waited for it in "
                 "_verify_param_shape_across_processes, a hang bounded only by the default "
                 "process-group timeout, 30 min for gloo in this torch "
                 "(torch.distributed.constants); with timeout=0.25 s DDP raised after ")


def _run(tmp_path, nproc, *args):
    report = tmp_path / "r.json"
    result = run_cli("run", "--nproc", str(nproc), "--json", str(report), "-q", *args,
                     timeout=300)
    return result, load_report(report)


def test_two_ranks_one_detects_the_other_waits(tmp_path):
    result, data = _run(tmp_path, 2, "-p", "ddp-sync")
    assert result.code == 0, result.stdout
    checks = checks_by_id(data)
    shapes = checks["ddp-sync.mismatched_shapes"]
    assert (shapes["outcome"], shapes["verdict"]) == ("failed", "known")
    assert shapes["detail"] == shapes["error"]["message"] == SHAPES_2
    # The real Fabric with a shape mismatch: the rank that raised exits and its peer is
    # released in a second or two; the Fabric hang (seed 002) is out_of_step, below.
    assert "Lightning Fabric" not in shapes["advice"]
    assert "hang" not in shapes["detail"]
    # Every rank says the same: the verdict is about the job.
    assert {r: e["detail"] for r, e in shapes["ranks"].items()} == {"0": SHAPES_2,
                                                                    "1": SHAPES_2}
    assert shapes["ranks"]["1"]["data"]["ranks"] == {"raised": [1], "waited": [0],
                                                     "went_on": []}
    extra = checks["ddp-sync.extra_parameter"]
    assert (extra["outcome"], extra["verdict"]) == ("passed", "ok")
    assert extra["detail"].startswith("raised on all 2 ranks, here in ")
    assert "DDP expects same model across all ranks" in extra["detail"]
    # One rank never reaches DDP's setup: the other waits in the seed's frame, for the
    # default timeout's real value, and an explicit timeout= ends it in an error.
    step = checks["ddp-sync.out_of_step"]
    assert (step["outcome"], step["verdict"]) == ("failed", "known")
    assert step["error"]["message"].startswith(OUT_OF_STEP_2)
    assert "Timed out waiting 250ms" in step["error"]["message"]
    waited = step["ranks"]["0"]["data"]
    assert (waited["where"], waited["default_timeout_s"], waited["seen"]) == (
        "_verify_param_shape_across_processes", {"gloo": 1800.0}, ["timed_out"])
    assert waited["seconds_to_error"] >= 0.25
    assert step["ranks"]["1"]["error"]["message"] == step["ranks"]["0"]["error"]["message"]


def test_one_rank_has_nothing_to_disagree_with(tmp_path):
    result, data = _run(tmp_path, 1, "-p", "ddp-sync")
    assert result.code == 0, result.stdout
    checks = checks_by_id(data)
    for name in ("mismatched_shapes", "extra_parameter"):
        check = checks["ddp-sync." + name]
        assert (check["outcome"], check["detail"]) == (
            "skipped", "needs 2 ranks that disagree about the model, found 1")
    assert checks["ddp-sync.barrier_after_setup"]["outcome"] == "passed"


@pytest.mark.parametrize("nproc", [1, 4])
def test_a_healthy_machine_exits_0_at_every_world_size(tmp_path, nproc):
    """The whole default suite: only known issues, whatever the number of ranks."""
    result, data = _run(tmp_path, nproc)
    bad = {c["id"]: (c["verdict"], c["detail"]) for c in data["checks"]
           if c["verdict"] in ("unexpected", "failure")}
    assert bad == {}
    assert result.code == 0, result.stdout
    assert data["plan"]["nproc"] == nproc
    assert sorted(checks_by_id(data)["collectives.all_gather"]["ranks"], key=int) == \
        [str(r) for r in range(nproc)]
    if nproc == 4:
        shapes = checks_by_id(data)["ddp-sync.mismatched_shapes"]
        assert shapes["verdict"] == "known"
        assert shapes["detail"].startswith(
            "DDP raised only on rank(s) 3 of 4 although rank 3 has a parameter of another "
            "shape; rank(s) ")
        seen = shapes["ranks"]["0"]["data"]["ranks"]
        assert seen["raised"] == [3]
        assert sorted(seen["waited"] + seen["went_on"]) == [0, 1, 2]


def test_an_nccl_run_with_the_same_behaviour_gets_the_same_verdicts(tmp_path):
    """What torch does does not change with the backend the checks ran on: a report whose
    ranks ran NCCL, re-judged, gets the verdicts the gloo run got."""
    import json

    result, data = _run(tmp_path, 2, "-p", "launch", "-p", "collectives", "-p",
                        "serialization", "-p", "checkpoint", "-p", "ddp-sync")
    assert result.code == 0, result.stdout
    for rank in data["ranks"]:
        rank["backend"] = "nccl"
    data["matrix"] = None  # never judged: `envcheck report` judges it afresh
    for check in data["checks"]:
        check["verdict"] = check["expectation"] = None
    path = tmp_path / "nccl.json"
    path.write_text(json.dumps(data))
    again = tmp_path / "again.json"
    res = run_cli("report", str(path), "--json", str(again))
    assert res.code == 0, res.stdout
    judged = load_report(again)
    assert judged["matrix"]["target"]["backend"] == "nccl"
    gloo = {c["id"]: c["verdict"] for c in load_report(tmp_path / "r.json")["checks"]}
    nccl = {c["id"]: c["verdict"] for c in judged["checks"]}
    # Only async_snapshot's failure on 2.4-2.6 is gloo-only (CPU tensors); not this torch.
    assert nccl == gloo
    assert "new" not in nccl.values()
