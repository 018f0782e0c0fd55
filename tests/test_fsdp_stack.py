"""The fsdp probe against what real training stacks do (issue 27), on 2 CPU ranks.

Each scenario runs twice: as user code does it without envcheck (tests/data/fsdp_real.py
under torchrun: a tiny GPT-2 built from a transformers config, tied embedding and
lm_head), and through `envcheck run -p fsdp --model`; the verdict must match what
really happened:

- sharding per top-level child splits GPT-2's tie (real: ValueError 'lm_head.weight' is
  shared); per block, as users shard, it trains. envcheck shards per block on its own
  (never a failure of its own split), and when the user's fsdp_units split the tie it
  fails with torch's error and says which tie;
- the EMA copy: deepcopy raises, load_state_dict(model.state_dict()) into an unsharded
  copy raises (mixed Tensor and DTensor), get_model_state_dict(full_state_dict=True)
  works: envcheck's deepcopy is a known issue whose advice is that form, ema_copy runs it;
- TorchTitan's divide factor 1.0 needs PREMUL_SUM, which gloo lacks: a known issue;
- TorchTitan's per-rank dataloader state (its own ParallelAwareDataloader) at another
  world size: a known issue with advice, while model, optimizer and lr scheduler reshard;
- a model whose shapes depend on the rank: real FSDP2 aborts a rank in its first
  all-gather; envcheck fails fast in fsdp.model, naming the ranks, with no hang.

transformers and torchtitan are optional locally (skipped); CI installs them (.ci/run)
and there they must run.
"""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import checks_by_id, launcher_env, load_report, run_cli

# Every test here starts real ranks; one worker under xdist (--dist loadgroup), so that
# the module's real jobs and envcheck runs are made once, not once per worker.
pytestmark = [pytest.mark.ranks, pytest.mark.xdist_group("fsdp_stack")]
# Its fixtures are session-scoped: under --dist loadgroup this worker runs other modules'
# tests between these, and module-scoped ones would be made again (about 42 s each time).

HERE = os.path.dirname(os.path.abspath(__file__))


def _need(module):
    if importlib.util.find_spec(module) is None:
        if os.environ.get("ENVCHECK_REQUIRE_FRAMEWORKS") == "1":
            pytest.fail("%s is not installed: .ci/run installs it" % module)
        pytest.skip("%s is not installed" % module)


GPT2 = '''
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def build():
    """A tiny GPT-2 from a config (no download): its lm_head is tied to the embedding."""
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    model.example_inputs = (torch.arange(8).reshape(1, 8),)
    return model


def build_split():
    """The same, with fsdp_units that split the tie (the top-level children)."""
    model = build()
    model.fsdp_units = ["transformer", "lm_head"]
    return model
'''

RANK_SHAPED = '''
import torch
import torch.distributed as dist


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        width = 4 + dist.get_rank()
        self.a = torch.nn.Linear(6, width)
        self.b = torch.nn.Linear(width, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))

    def example_inputs(self):
        return torch.ones(2, 6)


def build():
    return Net()
'''


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stack")
    (tmp / "gpt2tiny.py").write_text(textwrap.dedent(GPT2))
    (tmp / "rank_shaped.py").write_text(textwrap.dedent(RANK_SHAPED))
    return tmp


def _envcheck(tmp, *args):
    report = tmp / ("r%d.json" % len(os.listdir(tmp)))
    result = run_cli("run", "-p", "fsdp", "--json", str(report), *args, timeout=400,
                     cwd=str(tmp), env={"COLUMNS": "100"})
    assert report.exists(), result.stdout + result.stderr
    return result, checks_by_id(load_report(str(report)))


@pytest.fixture(scope="session")
def real(models):
    _need("transformers")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         "2", os.path.join(HERE, "data", "fsdp_real.py"), str(models / "gpt2tiny.py")],
        cwd=str(models), env=launcher_env(), capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    by_rank = {d["rank"]: d["outcomes"] for d in lines}
    assert by_rank[0] == by_rank[1]  # every scenario ends alike on both ranks
    return by_rank[0]


@pytest.fixture(scope="session")
def gpt2(models):
    _need("transformers")
    return _envcheck(models, "--model", "gpt2tiny.py:build")


def test_gpt2_sharded_per_block_trains_as_users_shard_it(real, gpt2):
    assert real["shard_top_level_children"].startswith(
        "ValueError: Parameter 'lm_head.weight' is shared with a parameter already managed "
        "by another FSDP group")
    assert real["shard_per_block"] == "ok: trained"
    result, checks = gpt2
    step = checks["fsdp.train_step"]
    assert step["outcome"] == "passed", step["detail"]
    data = step["ranks"]["0"]["data"]
    assert data["sharded"] == ("2 GPT2Block blocks (_no_split_modules) + root; tied "
                               "transformer.wte.weight = lm_head.weight held by the root")
    assert data["forward_bit_exact"] and data["grads_bit_exact"]
    for check in ("save_load", "reshard_grow", "reshard_shrink"):
        assert checks["fsdp." + check]["outcome"] == "passed", check
    assert "lm_head.weight' is shared" not in result.stdout


def test_the_ema_advice_is_the_fsdp2_form_that_really_works(real, gpt2):
    assert real["ema_deepcopy"] == ("AssertionError: FSDP does not support deepcopy. Please "
                                    "use state dict for serialization.")
    assert real["ema_unsharded_load_state_dict"].startswith(
        "RuntimeError: aten.copy_.default got mixed torch.Tensor and DTensor")
    assert real["ema_full_state_dict"] == "ok: True"
    result, checks = gpt2
    deep = checks["fsdp.deepcopy"]
    assert (deep["outcome"], deep["verdict"]) == ("failed", "known")
    assert deep["detail"] == ("copy.deepcopy of the FSDP2-sharded model raised AssertionError: "
                              "FSDP does not support deepcopy. Please use state dict for "
                              "serialization.")
    assert "ema.load_state_dict(get_model_state_dict(model, options=StateDictOptions(" \
           "full_state_dict=True)))" in deep["advice"]
    ema = checks["fsdp.ema_copy"]
    assert ema["outcome"] == "passed"
    data = ema["ranks"]["1"]["data"]
    assert data["unsharded_load_state_dict"].startswith(
        "RuntimeError: aten.copy_.default got mixed torch.Tensor and DTensor")
    assert (data["full_state_dict"], data["sharded_alike"]) == (28, 29)


def test_the_per_step_ema_update_is_said_for_the_form_where_it_works(real, gpt2):
    # What a training loop does after each step: ema_p.lerp_(p, 1 - decay). The real
    # script: the unsharded EMA (full tensors) cannot, the EMA sharded alike can.
    assert real["ema_lerp_unsharded"].startswith("RuntimeError:")
    assert "mixed torch.Tensor and DTensor" in real["ema_lerp_unsharded"]
    assert real["ema_lerp_sharded_alike"] == "ok: updated"
    result, checks = gpt2
    data = checks["fsdp.ema_copy"]["ranks"]["0"]["data"]
    assert data["lerp_unsharded"].split(":")[0] == real["ema_lerp_unsharded"].split(":")[0]
    assert "mixed torch.Tensor and DTensor" in data["lerp_unsharded"]
    assert data["lerp_sharded_alike"] == "works"
    assert "works only on the EMA sharded alike" in checks["fsdp.deepcopy"]["advice"]


def test_torchtitans_divide_factor_needs_premul_sum_which_gloo_lacks(real, gpt2):
    assert real["divide_factor_one"] == ("RuntimeError: Cannot use ReduceOp.PREMUL_SUM with "
                                         "Gloo")
    check = gpt2[1]["fsdp.gradient_divide"]
    assert (check["outcome"], check["verdict"]) == ("failed", "known")
    # details are cut at 200 characters; the error holds the whole message
    assert check["error"]["message"].endswith(
        "raised RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo; with "
        "set_force_sum_reduction_for_comms(True) as well: works: the gradients are the sum "
        "over the 2 ranks (bit-exact)")
    assert check["advice"].startswith("TorchTitan's gradient reduction")
    # The remedy, tried in the same run on the same model, as the real script tries it:
    # sum-only reductions give the exact sum over the ranks; and the default factor,
    # which would shrink TorchTitan's gradients, is not advised.
    assert real["divide_factor_one_force_sum"] == "ok: True"
    data = check["ranks"]["0"]["data"]
    assert data["force_sum_reduction"].startswith(
        "works: the gradients are the sum over the 2 ranks")
    assert ("also call set_force_sum_reduction_for_comms(True) on every FSDP module (tried "
            "here: works") in check["advice"]
    assert "do not reset the divide factor to its default" in check["advice"]
    assert "cannot run on CPU" not in check["advice"]


def test_torchtitans_dataloader_state_does_not_reshard_and_says_what_to_do(gpt2):
    _need("torchtitan")
    result, checks = gpt2
    assert result.code == 0, result.stdout  # known issues only
    grow, shrink = checks["fsdp.train_state_grow"], checks["fsdp.train_state_shrink"]
    assert (grow["outcome"], grow["verdict"]) == ("failed", "known")
    assert (shrink["outcome"], shrink["verdict"]) == ("failed", "known")
    assert grow["root_rank"] == 2
    assert grow["error"]["message"] == (
        "lr scheduler (LambdaLR) at step 3 loaded; the torchtitan 0.2.2 "
        "ParallelAwareDataloader state, saved by 2 ranks, does not load at 3: dcp.load "
        "raised CheckpointException on 1 rank(s): rank 2: RuntimeError: Missing key in "
        "checkpoint state_dict: dataloader.dp_rank_2.")
    # Ranks 0 and 1 loaded their own part: only rank 2 fails, so the report names it.
    assert [grow["ranks"][r]["outcome"] for r in "012"] == ["passed", "passed", "failed"]
    assert grow["ranks"]["0"]["detail"].endswith(
        "this rank's torchtitan 0.2.2 ParallelAwareDataloader state loaded, rank(s) 2's "
        "did not")
    assert shrink["error"]["message"].endswith(
        "does not load at 1: AssertionError: dp_degree is inconsistent before and after "
        "checkpoint, dataloader resharding is not supported yet.")
    assert "--checkpoint.exclude_from_loading dataloader" in grow["advice"]
    # the model and optimizer themselves reshard
    assert checks["fsdp.reshard_grow"]["outcome"] == "passed"


def test_fsdp_units_that_split_a_tie_fail_as_the_users_code_does(real, models):
    _need("transformers")
    result, checks = _envcheck(models, "--model", "gpt2tiny.py:build_split")
    step = checks["fsdp.train_step"]
    assert step["outcome"] == "failed"
    assert step["error"]["message"].startswith(
        "fully_shard worked, but the sharded model's forward/backward on cpu (backend gloo) "
        "raised " + real["shard_top_level_children"][:150])
    assert step["advice"].startswith(
        "your fsdp_units put tied parameters (transformer.wte.weight = lm_head.weight) in "
        "different units")
    assert step["ranks"]["0"]["data"]["sharded"].endswith(
        "tied transformer.wte.weight = lm_head.weight split by fsdp_units transformer, "
        "lm_head")


def test_a_rank_dependent_model_fails_fast_in_the_model_check(models):
    result, checks = _envcheck(models, "--model", "rank_shaped.py:build")
    assert result.code == 1
    model = checks["fsdp.model"]
    assert model["outcome"] == "failed"
    assert model["detail"] == ("the model differs between ranks (rank(s) 0; rank(s) 1): rank "
                               "0 has a.weight [4, 6], rank 1 has a.weight [5, 6]")
    assert model["ranks"]["0"]["outcome"] == model["ranks"]["1"]["outcome"] == "failed"
    assert checks["fsdp.train_step"]["detail"] == (
        "the model's parameters differ between ranks (see fsdp.model)")
    assert "fsdp.run" not in checks  # no crash, no hang
