"""envcheck's verdicts against what real Lightning Fabric, Accelerate and a tiny Hugging
Face model do on 2 CPU ranks.

The reference is the user's own code, run the user's way: ``python train.py`` with
Fabric's launcher starting rank 1. envcheck must say what it did.

The frameworks live in an interpreter of their own, which the ranks run under
(``envcheck run --python``): ENVCHECK_FRAMEWORKS_PYTHON, which CI sets to a venv with
torch and dev/requirements-frameworks.txt (.venv-frameworks), so that no other test's
ranks import them; else this interpreter, where it has them. CI also sets
ENVCHECK_REQUIRE_FRAMEWORKS=1: there a missing framework fails; elsewhere it skips.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, checks_by_id, load_report, run_cli

# Every test here starts real ranks; one worker under xdist (--dist loadgroup), so that
# the module's real jobs and envcheck runs are made once, not once per worker.
pytestmark = [pytest.mark.ranks, pytest.mark.xdist_group("frameworks_real")]

NEEDED = ("lightning", "accelerate", "transformers")


def _frameworks_python():
    """(interpreter, {package: version} of the frameworks there, what is missing)."""
    python = os.environ.get("ENVCHECK_FRAMEWORKS_PYTHON") or sys.executable
    code = ("import importlib.metadata as m, importlib.util as u, json, sys\n"
            "print(json.dumps({n: u.find_spec(n) and m.version(n) for n in sys.argv[1:]}))")
    try:
        proc = subprocess.run([python, "-c", code, *NEEDED], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        found = json.loads(proc.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        why = (str(exc).splitlines() or [""])[0]
        return python, {}, ["the frameworks (it did not run: %s)" % why]
    return python, found, [n for n in NEEDED if not found.get(n)]


PYTHON, VERSIONS, _missing = _frameworks_python()
if _missing:
    where = "%s (%s)" % (PYTHON, "ENVCHECK_FRAMEWORKS_PYTHON" if os.environ.get(
        "ENVCHECK_FRAMEWORKS_PYTHON") else "this interpreter")
    if os.environ.get("ENVCHECK_REQUIRE_FRAMEWORKS") == "1":
        raise RuntimeError("ENVCHECK_REQUIRE_FRAMEWORKS=1 but %s not installed in %s: pip "
                           "install torch==<this torch> -r dev/requirements-frameworks.txt"
                           % (", ".join(_missing), where))
    pytest.skip("%s not installed in %s (set ENVCHECK_FRAMEWORKS_PYTHON to an interpreter "
                "that has dev/requirements-frameworks.txt)" % (", ".join(_missing), where),
                allow_module_level=True)

# A tiny GPT-2 built from a config: no download. Tied embedding and lm_head.
TINY_HF = '''
import torch


def build():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16)
    model = GPT2LMHeadModel(config)
    model.example_inputs = (torch.arange(8).reshape(1, 8),)
    return model
'''

# The user's training script, run as users run it: Fabric's launcher starts rank 1.
TRAIN = '''
import copy, sys
import torch
from lightning.fabric import Fabric
from tinyhf import build

fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup(build())
try:
    ema = copy.deepcopy(model)
    print("rank %d: deepcopy ok" % fabric.global_rank, flush=True)
except Exception as exc:
    print("rank %d: deepcopy raised %s: %s" % (fabric.global_rank, type(exc).__name__, exc),
          flush=True)
    raise
try:
    fabric.barrier()
except Exception as exc:
    print("rank %d: barrier raised %s" % (fabric.global_rank, str(exc).splitlines()[0]),
          flush=True)
    raise
'''


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    where = tmp_path_factory.mktemp("fw")
    (where / "tinyhf.py").write_text(TINY_HF)
    (where / "train.py").write_text(TRAIN)
    return where


@pytest.fixture(scope="module")
def real(workdir):
    """What the user's script really does under Fabric's launcher."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([PYTHON, "train.py"], cwd=str(workdir), env=env,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    return proc


@pytest.fixture(scope="module")
def envcheck_run(workdir):
    report = workdir / "r.json"
    # Asked for by name: Fabric's own launcher runs (a job of its own) and a missing
    # DeepSpeed is a failure.
    result = run_cli("run", "-p", "serialization", "-p", "frameworks", "--model",
                     "tinyhf.py:build", "--framework", "lightning", "--framework",
                     "deepspeed", "--python", PYTHON, "--json", str(report),
                     cwd=str(workdir), timeout=400)
    return result, load_report(report)


def test_fabric_deepcopy_under_its_own_launcher_as_it_really_fails(real, envcheck_run):
    # The real script: rank 0's deepcopy raises, rank 1 copies and then loses rank 0.
    out = real.stdout
    assert real.returncode != 0
    assert "rank 0: deepcopy raised TypeError: cannot pickle '_thread.lock' object" in out
    assert "rank 1: deepcopy ok" in out
    assert "rank 1: barrier raised" in out and "Connection closed by peer" in out
    # envcheck says the same, as a known issue with Fabric's own API in the advice.
    result, data = envcheck_run
    check = checks_by_id(data)["frameworks.lightning_own_launcher"]
    assert (check["outcome"], check["verdict"]) == ("failed", "known")
    message = check["error"]["message"]
    assert message.startswith(
        "under Fabric's own launcher (python train.py, rank 0 started rank 1), copy.deepcopy "
        "of the model fabric.setup returned raised on rank(s) 0 only: TypeError: cannot "
        "pickle '_thread.lock' object; rank 1 copied it, then died at its next collective: "
        "RuntimeError: Connection closed by peer")
    assert message.endswith("copy.deepcopy(model.module) worked on both ranks")
    assert "ema = copy.deepcopy(model.module)" in check["advice"]
    assert {r: e["error"]["message"] for r, e in check["ranks"].items()} == {
        "0": message, "1": message}


def test_what_holds_under_envchecks_ranks_holds_for_the_frameworks(envcheck_run, workdir):
    result, data = envcheck_run
    checks = checks_by_id(data)
    verdicts = {c["id"]: (c["outcome"], c["verdict"]) for c in data["checks"]
                if c["probe"] in ("serialization", "frameworks")}
    for name in ("lightning_setup", "lightning_deepcopy", "lightning_save_load",
                 "accelerate_prepare", "accelerate_deepcopy", "accelerate_save_load"):
        assert verdicts["frameworks." + name] == ("passed", "ok"), checks["frameworks." + name]
    for name in ("ddp_wrap", "deepcopy_ddp", "deepcopy_ddp_module", "fresh_load_state_dict",
                 "pickle_ddp"):
        assert verdicts["serialization." + name] == ("passed", "ok")
    assert "GPT2LMHeadModel" in checks["serialization.model"]["detail"]
    assert checks["frameworks.lightning_setup"]["detail"] == (
        "Lightning %s: fabric.setup(tinyhf.py:build) gave _FabricModule over DDPStrategy"
        % VERSIONS["lightning"])
    assert checks["frameworks.lightning_deepcopy"]["detail"].endswith(
        "17 tensors equal, own memory, same output")
    # Asked for with --framework and absent: a failure that says so; the only one.
    ds = checks["frameworks.deepspeed_initialize"]
    assert (ds["outcome"], ds["verdict"]) == ("failed", "failure")
    assert ds["error"]["message"] == ("DeepSpeed is not installed in the ranks' interpreter "
                                      "(asked for with --framework deepspeed)")
    bad = sorted(c["id"] for c in data["checks"] if c["verdict"] in ("unexpected", "failure"))
    assert bad == ["frameworks.deepspeed_initialize"]
    assert result.code == 1
    # The versions join the environment and its header.
    versions = {k: VERSIONS[k] for k in ("lightning", "accelerate")}
    assert data["environment"]["frameworks"] == versions
    assert "frameworks           Lightning %s, Accelerate %s" % (
        versions["lightning"], versions["accelerate"]) in result.stdout


def test_without_asking_fabrics_own_launcher_is_skipped_saying_what_it_shows(tmp_path):
    # The default: frameworks installed, none asked for. The job under Fabric's own
    # launcher costs more than the rest of the suite: not run, but its known result is
    # said, with its source, and how to run it. The rest runs and passes.
    report = tmp_path / "r.json"
    result = run_cli("run", "-p", "frameworks", "--python", PYTHON, "--json", str(report),
                     "-q", timeout=300)
    assert result.code == 0, result.stdout + result.stderr
    data = load_report(report)
    verdicts = {c["id"]: (c["outcome"], c["verdict"]) for c in data["checks"]}
    for name in ("lightning_setup", "lightning_deepcopy", "lightning_save_load",
                 "accelerate_prepare", "accelerate_deepcopy", "accelerate_save_load"):
        assert verdicts["frameworks." + name] == ("passed", "ok")
    check = checks_by_id(data)["frameworks.lightning_own_launcher"]
    assert (check["outcome"], check["verdict"]) == ("skipped", None)
    assert check["detail"] == (
        "not run (a job of its own, 10-45 s): envcheck run --framework lightning runs it. "
        "Known from envcheck's own runs (Lightning 2.6.6, torch 2.13.0; its matrix, "
        "frameworks.toml): under Fabric's own launcher (python train.py), copy.deepcopy of "
        "the model fabric.setup returned raises on rank 0 only (TypeError: cannot pickle "
        "'_thread.lock' object) and rank 1 then dies at its next collective (Connection "
        "closed by peer); copy.deepcopy(model.module) works")


def test_accelerate_launch_without_multi_gpu_is_refused_naming_the_flag(workdir):
    accelerate = os.path.join(os.path.dirname(PYTHON), "accelerate")
    # envcheck's worker from this checkout: the frameworks' interpreter need not have it.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([accelerate, "launch", "--num_processes", "2", "-m",
                           "envcheck.worker.launched", "--out", str(workdir / "acc")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    assert ("envcheck: error: started by accelerate launch as a single process "
            "(ACCELERATE_* is set, RANK/WORLD_SIZE are not): add --multi_gpu") in proc.stderr


# The Open-Sora shape through both frameworks, the user's way: what each copy does.
GROUP_TRAIN = '''
import copy, json, os, sys
import torch
sys.path.insert(0, os.getcwd())
from mymodels.stdit import build_model
from lightning.fabric import Fabric
from accelerate import Accelerator

fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
fabric.launch()
out = {}


def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except Exception as exc:
        out[name] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:120])


torch.manual_seed(0)
wrapped = fabric.setup(build_model())
attempt("fabric_deepcopy", lambda: copy.deepcopy(wrapped))
attempt("fabric_deepcopy_module", lambda: copy.deepcopy(wrapped.module))
attempt("copy_before_setup", lambda: copy.deepcopy(build_model()))
accelerator = Accelerator(cpu=True)
prepared = accelerator.prepare(build_model())
attempt("accelerate_deepcopy", lambda: copy.deepcopy(prepared))
attempt("accelerate_deepcopy_unwrapped",
        lambda: copy.deepcopy(accelerator.unwrap_model(prepared)))


def fresh():
    ema = build_model()
    ema.load_state_dict(wrapped.module.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(ema.state_dict().values(),
                                                 wrapped.module.state_dict().values()))


attempt("fresh_load_state_dict", fresh)
if fabric.global_rank == 0:
    print(json.dumps(out), flush=True)
'''


def test_one_failure_seen_by_two_probes_is_one_judgement_with_remedies_tried(tmp_path):
    stdit = os.path.join(ROOT, "dev", "models", "mymodels")
    (tmp_path / "mymodels").mkdir()
    for name in ("__init__.py", "stdit.py"):
        with open(os.path.join(stdit, name), encoding="utf-8") as f:
            (tmp_path / "mymodels" / name).write_text(f.read())
    (tmp_path / "train.py").write_text(GROUP_TRAIN)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    proc = subprocess.run([PYTHON, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", "train.py"], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][0])
    pg = "TypeError: cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object"
    # The remedies the old advice gave all fail on this model, for real; the fresh
    # build works.
    for name in ("fabric_deepcopy", "fabric_deepcopy_module", "copy_before_setup",
                 "accelerate_deepcopy", "accelerate_deepcopy_unwrapped"):
        assert real[name] == pg, (name, real[name])
    assert real["fresh_load_state_dict"] == "ok"

    report = tmp_path / "r.json"
    result = run_cli("run", "-p", "serialization", "-p", "checkpoint", "-p", "frameworks",
                     "--model", "mymodels.stdit:build_model", "--python", PYTHON,
                     "--json", str(report), cwd=str(tmp_path), timeout=400)
    data = load_report(report)
    checks = checks_by_id(data)
    judge = checks["serialization.deepcopy_ddp_module"]
    assert (judge["outcome"], judge["verdict"]) == ("failed", "known")
    for cid in ("serialization.deepcopy_ddp", "serialization.pickle_ddp",
                "frameworks.lightning_deepcopy", "frameworks.accelerate_deepcopy"):
        assert (checks[cid]["outcome"], checks[cid]["verdict"]) == ("failed", "known"), cid
    # One advice for the one fact, in every check that saw it: no remedy that fails.
    fw = {checks[c]["advice"] for c in ("frameworks.lightning_deepcopy",
                                        "frameworks.accelerate_deepcopy")}
    assert len(fw) == 1
    (advice,) = fw
    assert advice.startswith("do not deepcopy this model after the framework wraps it "
                             "(blocks.0.sp_group (ProcessGroup), blocks.1.sp_group "
                             "(ProcessGroup) cannot be copied): build the copy fresh and "
                             "load the weights: ema = build_model(); ema.load_state_dict("
                             "model.state_dict()) (tried here: works)")
    assert advice.endswith("not ema = copy.deepcopy(ddp.module) (Fabric: copy before "
                           "fabric.setup; Accelerate: accelerator.unwrap_model) (tried "
                           "here: fails too)")
    # The model block: each remedy's status is what the real script found.
    framework = {c["key"]: c for c in data["model"]["capabilities"]}["framework"]
    assert framework["status"] == "fails"
    # Not asked for: Fabric's own launcher did not run, and the line says so.
    assert framework["not_run"] == ["Fabric's own launcher (--framework lightning)"]
    statuses = {r["key"]: r["status"] for r in framework["remedies"]}
    assert statuses == {"fresh": "tried here: works", "plain": "tried here: fails too",
                        "lookup": "untested"}
    assert result.code == 0, result.stdout
    assert (data["model"]["exit_code"], data["model"]["exit_code_strict"]) == (0, 1)
    assert result.stdout.splitlines()[0] == (
        "✗ Your model will fail in training: deepcopy, pickle, framework")
