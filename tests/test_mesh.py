"""The mesh probe on one host: real ranks, real gloo subgroups of a real DeviceMesh.

8 ranks of TorchTitan's own config (pp 2, dp_shard 2, tp 2); 4 ranks with ep 4 and the
uneven all_to_all; one rank of one tp group that drops out (it sleeps past its group's
deadline before its first op: tests/data/mesh/dropout/sitecustomize.py), named as that
group's hang with both ranks' stacks while the rest of the mesh is still checked.
"""

import os
import re

import pytest

from conftest import ROOT, checks_by_id, load_report, run_cli

pytestmark = pytest.mark.ranks

TORCHTITAN = ROOT + "/tests/data/mesh/llama3_debug_model.toml"
DROPOUT = ROOT + "/tests/data/mesh/dropout"
DIMS = ["pp", "dp_replicate", "dp_shard", "cp", "tp", "ep"]


def _run(tmp_path, *args, env=None):
    path = tmp_path / "report.json"
    res = run_cli("run", "-p", "mesh", "--json", str(path), *args, env=env, timeout=240)
    return res, checks_by_id(load_report(path))


def test_eight_ranks_of_torchtitans_config_pass_with_right_values(tmp_path):
    res, checks = _run(tmp_path, "-n", "8", "--mesh-config", TORCHTITAN)
    assert res.code == 0, res.stdout + res.stderr
    layout = checks["mesh.layout"]
    assert layout["outcome"] == "passed", layout
    assert layout["detail"] == ("pp=2 dp_shard=2 tp=2 from TorchTitan config "
                                "llama3_debug_model.toml: init_device_mesh(['pp', "
                                "'dp_shard', 'tp'], [2, 2, 2])")
    data = layout["ranks"]["5"]["data"]
    assert data["mesh_dim_names"] == ["pp", "dp_shard", "tp"]
    assert data["groups"]["tp"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # Every rank's own groups, as torch's DeviceMesh made them, are the layout's.
    assert checks["mesh.tp"]["ranks"]["5"]["data"]["group"] == [4, 5]
    assert checks["mesh.pp"]["ranks"]["5"]["data"]["group"] == [1, 5]
    assert checks["mesh.dp_shard"]["ranks"]["5"]["data"]["group"] == [5, 7]
    for dim, ops in (("pp", ["send_recv"]),
                     ("dp_shard", ["all_reduce", "reduce_scatter", "all_gather"]),
                     ("tp", ["all_gather", "all_reduce"])):
        check = checks["mesh." + dim]
        assert check["outcome"] == "passed", check
        assert all(e["data"]["ops"] == ops for e in check["ranks"].values()), check
        assert "in 4 group(s) of 2, right values" in check["detail"]
    for dim in ("dp_replicate", "cp", "ep"):
        assert checks["mesh." + dim]["outcome"] == "skipped"
        assert "degree 1 in this layout" in checks["mesh." + dim]["detail"]
    assert checks["mesh.placement"]["detail"] == "1 host: every group inside it"
    assert checks["mesh.speed"]["outcome"] == "passed"


def test_expert_parallel_all_to_all_with_uneven_splits(tmp_path):
    res, checks = _run(tmp_path, "-n", "4", "--mesh", "ep=4")
    assert res.code == 0, res.stdout + res.stderr
    ep = checks["mesh.ep"]
    assert ep["outcome"] == "passed", ep
    assert [e["data"]["ops"] for e in ep["ranks"].values()] == [["all_to_all"]] * 4
    assert ep["ranks"]["2"]["data"]["group"] == [0, 1, 2, 3]
    assert checks["mesh.layout"]["ranks"]["0"]["data"]["mesh_dim_names"] == \
        ["dp_shard_mod_ep", "dp_shard_in_ep"]


def test_a_rank_that_drops_out_is_its_groups_hang_and_the_rest_is_checked(tmp_path):
    """Rank 3 sleeps 6 s before its tp group's first op; the group's deadline is 0.4 x
    --timeout 10 = 4 s. tp group [2,3] is the hang, with rank 3 named late and both
    ranks' stacks; tp group [0,1], dp_shard and the later checks still run."""
    res, checks = _run(tmp_path, "-n", "4", "--mesh", "dp=2,tp=2", "--timeout", "10",
                       env={"MESH_DROPOUT": "tp:3:6", "PYTHONPATH": os.pathsep.join(
                           p for p in (DROPOUT, os.environ.get("PYTHONPATH")) if p)})
    assert res.code == 1, res.stdout + res.stderr
    tp = checks["mesh.tp"]
    assert tp["outcome"] == "hang", tp
    assert re.fullmatch(
        r"ranks 2,3: tp group \[2,3\] on %s: all_gather did not complete within 4\.0 s; "
        r"rank 3 reached it only after 6\.\d s, rank 2 waited; the other 1 tp group\(s\) "
        r"completed" % re.escape(tp["ranks"]["2"]["data"]["hosts"][0]), tp["detail"]), tp
    assert [tp["ranks"][r]["outcome"] for r in "0123"] == ["passed", "passed", "hang",
                                                          "hang"]
    # every rank of the group: its stack, where it was
    # rank 2 waits in its op; rank 3 is still asleep before its first one
    assert tp["ranks"]["2"]["where"]["at"].endswith(" _wait"), tp["ranks"]["2"]
    assert tp["ranks"]["3"]["where"]["at"].startswith("sitecustomize.py:"), tp["ranks"]["3"]
    assert "in _late_run" in tp["ranks"]["3"]["stack"]
    assert "in _wait" not in tp["ranks"]["3"]["stack"]
    assert "stack" not in tp["ranks"]["0"]
    assert "look at the stacks of ranks 2,3" in tp["advice"]
    assert checks["mesh.dp_shard"]["outcome"] == "passed"
    assert checks["mesh.placement"]["outcome"] == "passed"
    assert "rank 2: at ops.py:" in res.stdout
    assert "rank 3: at sitecustomize.py:" in res.stdout
