"""The model zoo: envcheck's answer about a model (the JSON report's ``model``) beside what
training scripts really do with the same model, in the same test.

The models (tests/data/zoo.py): Hugging Face GPT-2, Llama, ViT and ResNet with tiny
configs, TorchTitan's own llama3 Transformer (no fsdp_units), a model with a ModuleDict
of blocks, tied weights and persistent and non-persistent buffers, one holding a process
group, and one whose shapes depend on the rank. The truth (tests/data/zoo_truth.py) is
a torchrun job of plain training code — a DDP step, EMA by deepcopy, pickling, a fresh
build loaded with the weights and torch.save, an FSDP2 shard and step by each model's own
stack's units, a DCP round trip and its load at world size 1 — run at the same
world size as envcheck.

Every capability envcheck calls ``works`` must be ``ok`` in the truth and every one it
calls ``fails`` must fail there. At 2 ranks every model runs with -p fsdp; at 4 ranks
every model runs without it (its follow-ups start 5 and 1 ranks: 40 s a model on 2
cores), and TorchTitan's llama3 with it.

transformers and torchtitan (with triton, which its package imports) are optional
locally (skipped); CI installs them (.ci/run), and there they must run.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, checks_by_id, load_report, run_cli

# One worker under xdist (--dist loadgroup): the truth jobs and each envcheck run are
# made once and read by every test that needs them.
pytestmark = [pytest.mark.ranks, pytest.mark.xdist_group("zoo")]

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "data", "zoo.py")
TRUTH = os.path.join(HERE, "data", "zoo_truth.py")
HF = ("gpt2", "llama", "vit", "resnet")
MODELS = HF + ("titan_llama3", "blocks", "group_holder")
NEEDS = {name: "transformers" for name in HF}
NEEDS["titan_llama3"] = "torchtitan"


def _missing(module):
    """Why ``module`` cannot be imported here, or None; in CI (which installs it), an
    error. torchtitan 0.2.2's package imports triton."""
    absent = [m for m in (module, "triton" if module == "torchtitan" else None)
              if m and importlib.util.find_spec(m) is None]
    if not absent:
        return None
    if os.environ.get("ENVCHECK_REQUIRE_FRAMEWORKS") == "1":
        raise RuntimeError("%s not installed: .ci/run installs it" % " and ".join(absent))
    return "%s not installed (CI installs it)" % " and ".join(absent)


def _runnable(names):
    return [n for n in names if not (NEEDS.get(n) and _missing(NEEDS[n]))]


def _launcher_env():
    return {k: v for k, v in os.environ.items()
            if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}


def _truth(nproc):
    names = _runnable(MODELS)
    sharded = [n for n, p, f in SHAPES if p == nproc and f]
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         str(nproc), TRUTH, ZOO, *names], cwd=os.path.dirname(ZOO),
        env=dict(_launcher_env(), ZOO_FSDP=",".join(sharded)),
        capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(line)


# Session-scoped: under --dist loadgroup the zoo's worker runs other modules' tests between
# its own, and a module-scoped fixture would be made again each time (two truth jobs of
# about 50 s each).
@pytest.fixture(scope="session")
def truth():
    return {2: _truth(2), 4: _truth(4)}


_RUNS = {}


def _envcheck(tmp_path, name, nproc, fsdp):
    """envcheck's run on the zoo's model, once per (model, ranks, -p fsdp) in a test
    process: the tests that look closer at one model read the same run."""
    key = (name, nproc, fsdp)
    if key not in _RUNS:
        _RUNS[key] = _run_envcheck(tmp_path, name, nproc, fsdp)
    return _RUNS[key]


def _run_envcheck(tmp_path, name, nproc, fsdp):
    report = tmp_path / ("%s-%d.json" % (name, nproc))
    probes = ["-p", "serialization", "-p", "checkpoint"] + (["-p", "fsdp"] if fsdp else [])
    result = run_cli("run", "-q", "--model", "%s:%s" % (ZOO, name), "--nproc", str(nproc),
                     *probes, "--json", str(report), timeout=400, cwd=str(tmp_path),
                     env={"COLUMNS": "100"})
    assert report.exists(), result.stdout + result.stderr
    return result, load_report(str(report))


# FSDP2 beside real training: every model at 2 ranks but GPT-2, whose FSDP2 training,
# save and reshard tests/test_fsdp_stack.py compares already (sharded per block, as its
# users do), and TorchTitan's llama3 at 4 (its follow-ups start 5 ranks, then 1: about
# 40 s a model on 2 cores).
SHAPES = [(name, 2, name != "gpt2") for name in MODELS] + [
    (name, 4, name == "titan_llama3") for name in MODELS]


@pytest.mark.parametrize("name,nproc,fsdp", SHAPES,
                         ids=["%s-%d%s" % (n, p, "-fsdp" if f else "") for n, p, f in SHAPES])
def test_envchecks_answer_about_the_model_is_what_training_does_with_it(
        truth, tmp_path, name, nproc, fsdp):
    if NEEDS.get(name) and _missing(NEEDS[name]):
        pytest.skip(_missing(NEEDS[name]))
    real = truth[nproc][name]
    result, data = _envcheck(tmp_path, name, nproc, fsdp)
    answer = {c["key"]: c for c in data["model"]["capabilities"]}
    judged = {}
    for key, outcome in real.items():
        cap = answer[key]
        if outcome == "not run":  # FSDP2 is compared where envcheck ran -p fsdp
            assert cap["status"] == "not checked" and not fsdp, (key, cap)
        if cap["status"] == "not checked":
            judged[key] = None
            continue
        judged[key] = cap["status"]
        assert (cap["status"] == "works") == (outcome == "ok"), (key, cap, outcome)
    # What was compared: every capability but FSDP2 where it was not asked for.
    unchecked = sorted(k for k, v in judged.items() if v is None)
    assert unchecked == ([] if fsdp else ["fsdp"]), (unchecked, answer)
    # The screen's first line is the model's answer, naming what fails.
    failing = [answer[k]["label"] for k in data["model"]["fails"]]
    first = result.stdout.splitlines()[0]
    if failing:
        assert first == "✗ Your model will fail in training: " + ", ".join(failing)
    else:
        assert first.startswith("✓ Your model survives what training does to it here: ")
    assert data["model"]["exit_code"] == result.code


def test_a_model_that_holds_a_process_group_is_named_and_its_remedy_works(truth, tmp_path):
    real = truth[2]["group_holder"]
    assert real["deepcopy"].startswith("TypeError: cannot pickle 'torch._C._distributed_c10d"
                                       ".ProcessGroup' object")
    assert real["state_dict"] == "ok"  # the remedy envcheck prints, done the plain way
    result, data = _envcheck(tmp_path, "group_holder", 2, True)
    answer = {c["key"]: c for c in data["model"]["capabilities"]}
    assert answer["deepcopy"]["blocked_by"] == ["layers.0.sp_group (ProcessGroup)",
                                                "layers.1.sp_group (ProcessGroup)"]
    remedies = {r["key"]: r["status"] for r in answer["deepcopy"]["remedies"]}
    assert remedies == {"fresh": "tried here: works", "lookup": "untested"}
    assert (data["model"]["exit_code"], data["model"]["exit_code_strict"]) == (0, 1)
    assert result.code == 0
    assert "  the node: nothing unexpected" in result.stdout.splitlines()


def test_titans_llama3_without_fsdp_units_shards_trains_saves_loads_and_reshards(
        truth, tmp_path):
    reason = _missing("torchtitan")
    if reason:
        pytest.skip(reason)
    assert truth[2]["titan_llama3"]["fsdp"] == "ok"
    result, data = _envcheck(tmp_path, "titan_llama3", 2, True)
    checks = checks_by_id(data)
    for check in ("model", "train_step", "save_load", "reshard_grow", "reshard_shrink"):
        assert checks["fsdp." + check]["outcome"] == "passed", checks["fsdp." + check]
    step = checks["fsdp.train_step"]["ranks"]["0"]["data"]
    assert step["sharded"] == ("5 top-level children (the blocks of layers, one unit each) "
                               "+ root")
    fsdp = {c["key"]: c for c in data["model"]["capabilities"]}["fsdp"]
    assert fsdp["status"] == "works" and "(5 top-level children" in fsdp["detail"]


RANK_DEPENDENT_TRAIN = '''
import sys
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, sys.argv[1])
import zoo

dist.init_process_group("gloo")
DDP(zoo.rank_dependent(dist.get_rank()))
'''


def test_a_rank_dependent_model_fails_ddp_as_a_training_script_does(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(RANK_DEPENDENT_TRAIN)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         "2", str(script), os.path.dirname(ZOO)], env=_launcher_env(), capture_output=True,
        text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert proc.returncode != 0
    assert "appears not to match sizes of the same param in process 0" in proc.stderr
    result, data = _envcheck(tmp_path, "rank_dependent", 2, False)
    answer = {c["key"]: c for c in data["model"]["capabilities"]}
    assert answer["ddp"]["status"] == "fails"
    assert "appears not to match sizes of the same param in process 0" in \
        answer["ddp"]["detail"]
    # What needs the DDP model was not tried: said so, not called working.
    for key in ("deepcopy", "pickle"):
        assert answer[key]["status"] == "not checked", answer[key]
