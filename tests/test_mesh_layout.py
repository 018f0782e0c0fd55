"""The job's layout (core/mesh.py), read from every source, refused when its product is
not the world size, and laid out as TorchTitan's ParallelDims builds it: no ranks start.

The groups are checked against torch's own DeviceMesh in tests/test_mesh.py (real ranks);
here, against the row-major layout init_device_mesh documents.
"""

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from envcheck.core import mesh
from envcheck.core.errors import UsageError

TORCHTITAN = ROOT + "/tests/data/mesh/llama3_debug_model.toml"


def test_flags_resolve_dp_shard_and_build_torchtitans_order():
    layout = mesh.read("tp=2,pp=2", None, None, 8)  # dp_shard: -1, the rest
    assert layout.degree("dp_shard") == 2
    assert layout.mesh_dims() == [("pp", 2), ("dp_shard", 2), ("tp", 2)]
    assert layout.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert layout.groups("dp_shard") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert layout.groups("pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert layout.active == ["pp", "dp_shard", "tp"]
    assert mesh.read("dp=2,tp=2", None, None, 4).degrees == \
        mesh.read("dp_shard=2,tp=2", None, None, 4).degrees


def test_torchtitans_own_config_is_read_as_torchtitan_reads_it():
    """The llama3 debug model's TOML from TorchTitan's repository, its [parallelism]
    edited to tp 2, pp 2, data_parallel_shard_degree -1 (the rest): on 8 ranks that is
    dp_shard 2, the same layout as --mesh dp_shard=2,tp=2,pp=2."""
    layout = mesh.read(None, TORCHTITAN, None, 8)
    assert dict(layout.degrees) == {"pp": 2, "dp_replicate": 1, "dp_shard": 2, "cp": 1,
                                    "tp": 2, "ep": 1}
    assert layout.degrees == mesh.read("dp_shard=2,tp=2,pp=2", None, None, 8).degrees
    assert layout.source == "TorchTitan config llama3_debug_model.toml"
    # On 6 ranks the rest is 6 // 4 = 1: TorchTitan's _validate fails with its numbers.
    with pytest.raises(UsageError) as err:
        mesh.read(None, TORCHTITAN, None, 6)
    assert "dp_replicate(1) * dp_shard(1) * cp(1) * tp(2) * pp(2) = 4 != WORLD_SIZE(6)" \
        in str(err.value)


def test_megatron_deepspeed_and_accelerate(tmp_path):
    args = tmp_path / "pretrain.sh"
    args.write_text("torchrun pretrain_gpt.py \\\n  --tensor-model-parallel-size 2 \\\n"
                    "  --pipeline-model-parallel-size=2 --expert-model-parallel-size 2\n")
    layout = mesh.read(None, str(args), None, 8)
    assert (layout.degree("tp"), layout.degree("pp"), layout.degree("ep"),
            layout.degree("dp_shard")) == (2, 2, 2, 2)
    assert mesh.read("--tensor-model-parallel-size 4", None, None, 8).degree("dp_shard") == 2
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}}))
    assert mesh.read(None, str(ds), None, 4).degree("tp") == 2
    acc = tmp_path / "accelerate.yaml"
    acc.write_text("distributed_type: FSDP\nparallelism_config:\n"
                   "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2\n")
    layout = mesh.read(None, str(acc), None, 4)
    assert (layout.degree("dp_shard"), layout.degree("tp")) == (2, 2)
    empty = tmp_path / "plain.json"
    empty.write_text("{}")
    with pytest.raises(UsageError, match="states no parallel degree"):
        mesh.read(None, str(empty), None, 4)


def test_expert_parallel_is_torchtitans_dp2ep():
    layout = mesh.read("ep=4", None, None, 4)
    assert layout.mesh_dims() == [("dp_shard_mod_ep", 1), ("dp_shard_in_ep", 4)]
    assert layout.groups("ep") == [[0, 1, 2, 3]]
    layout = mesh.read("dp_shard=4,ep=2", None, None, 4)
    assert layout.groups("ep") == [[0, 1], [2, 3]]
    assert layout.groups("dp_shard") == [[0, 1, 2, 3]]
    with pytest.raises(UsageError, match=r"ep\(3\) must be a multiple of cp\(1\)"):
        mesh.read("ep=3", None, None, 4)


@pytest.mark.parametrize("spec, world, words", [
    ("dp_shard=2,tp=2,pp=2", 4,
     "--mesh dp_shard=2,tp=2,pp=2: invalid parallel dims: dp_replicate(1) * dp_shard(2) * "
     "cp(1) * tp(2) * pp(2) = 8 != WORLD_SIZE(4)"),
    ("tp=3", 4, "dp_replicate(1) * dp_shard(1) * cp(1) * tp(3) * pp(1) = 3 != WORLD_SIZE(4)"),
    ("tp=2,xp=2", 4, "write NAME=DEGREE,... with NAME one of pp, dp_replicate"),
    ("tp=0", 4, "tp=0: a parallel degree is 1 or more"),
])
def test_bad_layouts_are_one_line(spec, world, words):
    with pytest.raises(UsageError) as err:
        mesh.read(spec, None, None, world)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_better_order_is_found_for_a_tp_group_across_hosts():
    hosts = ["node1", "node1", "node2", "node2"]
    good = mesh.read("dp=2,tp=2", None, None, 4)
    assert [mesh.hosts_of(g, hosts) for g in good.groups("tp")] == [["node1"], ["node2"]]
    bad = mesh.read("dp=2,tp=2", None, "tp,dp", 4)
    assert bad.groups("tp") == [[0, 2], [1, 3]]
    assert mesh.better_order(bad, "tp", hosts) == ["dp_shard", "tp"]
    # A TP group larger than a host: no order keeps it inside one.
    assert mesh.better_order(mesh.read("tp=4", None, None, 4), "tp", hosts) is None


def test_mesh_probe_is_opt_in_and_added_by_a_layout():
    from envcheck.probes import catalog
    known = catalog.all_probes(())
    assert "mesh" not in [s.name for s in catalog.select(known)]
    chosen = mesh.with_probe(catalog.select(known, ["collectives"]), known)
    assert [s.name for s in chosen] == ["collectives", "mesh"]
    assert mesh.with_probe(catalog.select(known), known, ["mesh"]) == catalog.select(known)


def test_mismatch_is_exit_2_before_any_rank(tmp_path):
    """--nproc 4 with a layout of 8: refused by make_plan, one line, no rank started
    (envcheck check's path: run_cli refuses to start ranks in the quick lane, and this
    never gets that far)."""
    from envcheck import api
    with pytest.raises(UsageError) as err:
        api.plan(api.RunOptions(nproc=4, mesh="dp_shard=2,tp=2,pp=2"))
    assert str(err.value) == (
        "--mesh dp_shard=2,tp=2,pp=2: invalid parallel dims: dp_replicate(1) * "
        "dp_shard(2) * cp(1) * tp(2) * pp(2) = 8 != WORLD_SIZE(4): give degrees whose "
        "product is 4 (dp_shard=-1 takes the rest), or run 8 ranks")
    # The CLI itself (run_cli would refuse "run" in the quick lane: no rank starts here).
    res = subprocess.run([sys.executable, "-m", "envcheck", "run", "-n", "6",
                          "--mesh-config", TORCHTITAN, "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        "envcheck: error: TorchTitan config llama3_debug_model.toml: invalid parallel dims: "
        "dp_replicate(1) * dp_shard(1) * cp(1) * tp(2) * pp(2) = 4 != WORLD_SIZE(6)"
        ": give degrees whose product is 6 (dp_shard=-1 takes the rest), or run 4 ranks"]
    assert not (tmp_path / "r.json").exists()
