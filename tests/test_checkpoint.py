"""The checkpoint probe: three real 2-rank gloo runs, each shared by many assertions.

- the local torch with numpy (every check, and that no checkpoint directory survives:
  the run gets its own TMPDIR, planted with a dead run's leftover directory);
- the user's model (--model) whose factory seeds by rank, with
  TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (the environment override of the load default);
- the same torch in a venv without numpy, built once per machine and cached.
"""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from conftest import checks_by_id, load_report, run_cli, torch_only_python

CHECKS = ["save_load", "weights_only", "default_load", "dcp_save_load", "dcp_dedup",
          "reshard_load", "async_save", "async_snapshot", "no_process_group"]
DCP_LATER = ["dcp_dedup", "reshard_load", "async_save", "async_snapshot"]

MODEL = '''
import torch


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 6)
        self.norm = torch.nn.LayerNorm(6)
        self.head = torch.nn.Linear(6, 10, bias=False)
        self.head.weight = self.emb.weight


def build(rank):
    torch.manual_seed(rank)  # every rank starts with different weights
    return Tied()
'''


def _ours(run_tmp):
    # torch keeps caches there too (torchinductor_USER): not envcheck's to remove.
    return sorted(n for n in os.listdir(run_tmp) if n.startswith("envcheck"))


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _run(tmp, *args, env=None, cwd=None):
    """One run with its own TMPDIR, so that leftovers can be seen; returns (result, checks)."""
    report = tmp / "report.json"
    run_tmp = tmp / "tmp"
    run_tmp.mkdir()
    # The directory of a run whose machine went down (nothing of it could clean up):
    # the next run removes it. Checkpoints live inside a run's directory.
    stale = run_tmp / ("envcheck-run-%d-stale" % _dead_pid())
    (stale / "tmp" / ("envcheck-ckpt-%s-1-x" % socket.gethostname())).mkdir(parents=True)
    (stale / "tmp" / "x.pt").write_bytes(b"x")
    result = run_cli("run", "-p", "checkpoint", "--json", str(report), "-q", "-v", *args,
                     env=dict(env or {}, TMPDIR=str(run_tmp)), cwd=cwd)
    assert report.exists(), result.stderr
    checks = {k.split(".", 1)[1]: v for k, v in checks_by_id(load_report(str(report))).items()
              if k.startswith("checkpoint.")}
    return result, checks, run_tmp


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ckpt_model")
    (tmp / "tied_model.py").write_text(textwrap.dedent(MODEL))
    return _run(tmp, "--model", "tied_model.py:build", cwd=str(tmp),
                env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})


@pytest.fixture(scope="module")
def nonumpy_run(tmp_path_factory):
    python = torch_only_python()
    return _run(tmp_path_factory.mktemp("ckpt_nonumpy"), "--python", python)


@pytest.mark.ranks
def test_every_check_on_every_rank(run):
    _, checks, _ = run
    assert list(checks) == CHECKS  # no "model" check without --model
    for name in CHECKS:
        assert set(checks[name]["ranks"]) == {"0", "1"}


@pytest.mark.ranks
@pytest.mark.parametrize("name", ["save_load", "weights_only", "dcp_save_load",
                                  "reshard_load", "async_save", "async_snapshot",
                                  "no_process_group"])
def test_round_trips_pass_bit_exact(run, name):
    check = run[1][name]
    assert check["outcome"] == "passed", check
    if name != "no_process_group":
        assert "bit-exact" in check["detail"] or "did not reach" in check["detail"]


@pytest.mark.ranks
def test_dcp_reports_which_api_and_shards(run):
    check = run[1]["dcp_save_load"]
    data = check["ranks"]["0"]["data"]
    assert data["api"] == "dcp.save/dcp.load" and data["api"] in check["detail"]
    assert "DTensor Shard(0)" in data["sharded"]
    assert ".metadata" in data["files"] and len(data["files"]) == 3  # metadata + 2 ranks


@pytest.mark.ranks
def test_weights_only_default_says_what_to_change(run):
    # torch >= 2.6 (the local 2.13) loads with weights_only=True unless told otherwise.
    check = run[1]["default_load"]
    assert check["outcome"] == "failed"
    data = check["ranks"]["0"]["data"]
    assert data["default_weights_only"] is True
    assert data["unsafe_globals"] == ["argparse.Namespace"]
    assert data["fixes"] == {"weights_only=False": "loads, bit-exact",
                             "safe_globals": "loads, bit-exact"}
    assert "torch 2.6" in check["detail"] and "argparse.Namespace" in check["detail"]
    # The probe's own advice (the matrix may put its own on the check once it knows it).
    advice = check["ranks"]["0"]["advice"]
    for fix in ("weights_only=False", "add_safe_globals([argparse.Namespace])",
                "safe_globals([argparse.Namespace])"):
        assert fix in advice


@pytest.mark.ranks
def test_dedup_hazard_names_the_ranks_whose_values_won(run):
    check = run[1]["dcp_dedup"]
    assert check["outcome"] == "passed"
    kept = check["ranks"]["0"]["data"]["kept_from_rank"]
    assert kept == check["ranks"]["1"]["data"]["kept_from_rank"]
    assert set(kept.values()) <= {0, 1}
    assert check["detail"].startswith("hazard:")
    for rank in set(kept.values()):
        assert "rank %d's values" % rank in check["detail"]


@pytest.mark.ranks
def test_reshard_load_in_one_process_and_conversion(run):
    check = run[1]["reshard_load"]
    data = check["ranks"]["0"]["data"]
    assert data["load"] == "dcp.load(no_dist=True)"
    assert data["convert"] == "format_utils.dcp_to_torch_save"
    assert (data["world_size_saved"], data["world_size_loaded"]) == (2, 1)
    assert "DTensor reassembled whole" in check["detail"]


@pytest.mark.ranks
def test_checkpoints_hold_no_process_group(run):
    scanned = run[1]["no_process_group"]["ranks"]["0"]["data"]["globals_per_file"]
    assert {"group_holder.pt", "state.pt", "resume.pt", "dcp/.metadata"} <= set(scanned)


@pytest.mark.ranks
def test_no_checkpoint_directory_survives(run):
    result, checks, run_tmp = run
    private = checks["save_load"]["ranks"]["0"]["data"]["dir"]
    shared = checks["dcp_save_load"]["ranks"]["0"]["data"]["dir"]
    for path in (private, shared):
        assert path.startswith(str(run_tmp)) and not os.path.exists(path)
    assert checks["save_load"]["ranks"]["1"]["data"]["dir"] != private
    # Also gone: the dead run's leftover, and the supervisor's own run directory.
    assert _ours(run_tmp) == [], result.stderr


@pytest.mark.ranks
def test_table_shows_the_hazard_and_the_advice(run):
    result = run[0]
    assert result.code == 0, result.stderr  # default_load's failure is a known issue
    assert "dcp_dedup" in result.stdout and "hazard" in result.stdout
    assert "weights_only=False" in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.ranks
def test_user_model_runs_the_round_trips(model_run):
    _, checks, run_tmp = model_run
    assert list(checks) == ["model"] + CHECKS
    assert checks["model"]["outcome"] == "passed"
    for name in ("save_load", "weights_only", "dcp_save_load", "reshard_load", "async_save"):
        assert checks[name]["outcome"] == "passed", checks[name]
        assert checks[name]["detail"].startswith("tied_model.py:build:")
    # Tied embedding/head weights stay one tensor through torch.save.
    assert "tied weights still shared" in checks["save_load"]["detail"]
    assert _ours(run_tmp) == []


@pytest.mark.ranks
def test_user_model_replicas_are_synced_before_dcp(model_run):
    check = model_run[1]["dcp_save_load"]
    assert check["ranks"]["0"]["data"]["replicas_differed_before_sync"] is True
    assert "different weights" in check["detail"]


@pytest.mark.ranks
def test_env_override_of_the_load_default_is_reported(model_run):
    check = model_run[1]["default_load"]
    assert check["outcome"] == "passed"
    data = check["ranks"]["0"]["data"]
    assert data["default_weights_only"] is False
    assert data["forced_by_env"] == {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" in check["detail"]
    assert "argparse.Namespace" in check["detail"]  # what weights_only=True would refuse


@pytest.mark.ranks
def test_without_numpy_dcp_says_numpy_is_missing(nonumpy_run):
    result, checks, run_tmp = nonumpy_run
    check = checks["dcp_save_load"]
    assert check["outcome"] == "failed"
    assert set(check["ranks"]) == {"0", "1"}
    assert all(r["outcome"] == "failed" for r in check["ranks"].values())
    assert "Numpy is not available" in check["error"]["message"]
    assert check["detail"].startswith("numpy is not installed")
    assert "pip install numpy" in check["ranks"]["0"]["advice"]
    assert check["ranks"]["0"]["data"] == {"numpy_importable": False, "numpy": None}
    for name in DCP_LATER:
        assert checks[name]["outcome"] == "skipped"
        assert "dcp_save_load" in checks[name]["detail"]
    for name in ("save_load", "weights_only", "no_process_group"):
        assert checks[name]["outcome"] == "passed", checks[name]
    assert "Traceback" not in result.stderr
    assert _ours(run_tmp) == []
