"""``envcheck run --model``: the serialization checks on the user's own model.

Every case is one real 2-rank run (module-scoped), with the user's code written to a
temporary directory; what the user's code does wrong must come back as a failed
``serialization.model`` check with their traceback, never as a crash of envcheck.
"""

import textwrap
import time
from pathlib import Path

import pytest

from conftest import checks_by_id, load_report, run_cli

pytestmark = pytest.mark.ranks  # every test here starts real ranks

DDP_CHECKS = ("ddp_wrap", "deepcopy_ddp", "deepcopy_ddp_module", "fresh_load_state_dict",
              "pickle_ddp")

# The Open-Sora shape: attention layers keep the sequence-parallel group as an attribute.
# The same file dev/observe.py runs on every release, so the test and the matrix's
# evidence use one model.
OPEN_SORA_LIKE = (Path(__file__).resolve().parent.parent / "dev" / "models" / "mymodels"
                  / "stdit.py").read_text(encoding="utf-8")

GOOD = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                                        torch.nn.Linear(8, 2))
        self.norm = torch.nn.BatchNorm1d(2)
        self.example_inputs = (torch.arange(12.0).reshape(3, 4),)

    def forward(self, x):
        return self.norm(self.body(x))


def make(rank, *, device):
    assert isinstance(device, torch.device) and isinstance(rank, int)
    return Net()
'''

RAISES = '''
def build():
    config = {}
    return config["hidden_size"]  # the user's bug
'''

# Rank 0 gets a module, rank 1 something else: the other checks must skip, not hang.
NOT_A_MODULE = '''
import torch


def build(rank):
    if rank == 0:
        return torch.nn.Linear(2, 2)
    return {"weights": torch.zeros(2)}
'''

IMPORT_ERROR = '''
import torch
import not_a_real_module_envcheck


def build():  # there: a factory the file lacks is found before any rank starts
    return torch.nn.Linear(2, 2)
'''


def _run(tmp_path_factory, name, source, spec, code, cwd_is_dir=False,
         probes=("serialization",)):
    folder = tmp_path_factory.mktemp(name)
    target = folder / source[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(source[1]))
    report = folder / "report.json"
    model = spec if cwd_is_dir else "%s:%s" % (target, spec)
    args = [a for p in probes for a in ("-p", p)]
    result = run_cli("run", *args, "--json", str(report), "-q", "-v", "--model", model,
                     cwd=str(folder))
    assert result.code == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result, checks_by_id(load_report(str(report)))


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return _run(tmp_path_factory, "good", ("net.py", GOOD), "make", 0)


@pytest.fixture(scope="module")
def open_sora(tmp_path_factory):
    # MODULE:FACTORY form, importable from the cwd the way `python -m` would find it.
    return _run(tmp_path_factory, "opensora", ("mymodels/stdit.py", OPEN_SORA_LIKE),
                "mymodels.stdit:build_model", 0, cwd_is_dir=True)


def test_user_model_loads_with_rank_and_device(good):
    model = good[1]["serialization.model"]
    assert model["outcome"] == "passed", model
    assert "Net, 62 parameters on cpu" in model["detail"]
    assert model["ranks"]["0"]["data"]["parameters"] == 62


@pytest.mark.parametrize("name", DDP_CHECKS)
def test_user_model_copies_match(good, name):
    check = good[1]["serialization." + name]
    assert check["outcome"] == "passed", check
    assert "net.py:make" in check["detail"]


def test_user_model_forward_pass_uses_its_example_inputs(good):
    # BatchNorm buffers count too: 4 linear tensors + 5 norm tensors.
    detail = good[1]["serialization.deepcopy_ddp_module"]["detail"]
    assert "9 tensors equal, own memory, same output" in detail


def test_open_sora_shape_deepcopy_fails_with_pickle_error_and_advice(open_sora):
    result, checks = open_sora
    assert checks["serialization.model"]["outcome"] == "passed"
    assert checks["serialization.ddp_wrap"]["outcome"] == "passed"
    for name in ("deepcopy_ddp_module", "deepcopy_ddp", "pickle_ddp"):
        check = checks["serialization." + name]
        assert check["outcome"] == "failed", check
        assert check["error"]["type"] == "TypeError"
        assert "cannot pickle 'torch._C._distributed_c10d.ProcessGroup' object" \
            in check["error"]["message"]
    ema = checks["serialization.deepcopy_ddp_module"]
    assert "load_state_dict" in ema["advice"]
    assert "load_state_dict" in result.stdout


# The truth, beside envcheck: a real process builds the model, its deepcopy fails, and
# with exactly the attributes envcheck names removed, the deepcopy works.
WITHOUT_NAMED = '''
import copy, importlib.util, json, sys
import torch.distributed as dist
dist.init_process_group("gloo")
spec = importlib.util.spec_from_file_location("stdit", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model, out = m.build_model(), {}
try:
    copy.deepcopy(model); out["as_built"] = "copied"
except Exception as exc:
    out["as_built"] = type(exc).__name__
for path in sys.argv[2:]:
    owner, attr = path.rsplit(".", 1)
    delattr(model.get_submodule(owner), attr)
copy.deepcopy(model); out["without_named"] = "copied"
print(json.dumps(out))
dist.destroy_process_group()
'''


def test_open_sora_shape_names_the_attributes_that_hold_the_group(open_sora, tmp_path):
    import json
    import subprocess
    import sys

    from conftest import ROOT, launcher_env

    named = ["blocks.0.sp_group (ProcessGroup)", "blocks.1.sp_group (ProcessGroup)"]
    for name in ("deepcopy_ddp_module", "deepcopy_ddp", "pickle_ddp"):
        check = open_sora[1]["serialization." + name]
        assert check["ranks"]["0"]["data"]["blocked_by"] == named, check
        assert check["detail"].startswith(
            "mymodels.stdit:build_model: blocks.0.sp_group (ProcessGroup), blocks.1.sp_group "
            "(ProcessGroup) cannot be copied: cannot pickle"), check["detail"]
    script = tmp_path / "without_named.py"
    script.write_text(WITHOUT_NAMED)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         "1", str(script), str(Path(ROOT) / "dev" / "models" / "mymodels" / "stdit.py")]
        + [n.split(" ")[0] for n in named], env=launcher_env(), capture_output=True,
        text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    truth = json.loads(proc.stdout.strip().splitlines()[-1])
    assert truth == {"as_built": "TypeError", "without_named": "copied"}


def test_open_sora_shape_fresh_build_is_the_fix_that_works(open_sora):
    check = open_sora[1]["serialization.fresh_load_state_dict"]
    assert check["outcome"] == "passed", check
    assert "equals original (where deepcopy failed) on all 2 ranks" in check["detail"]


def test_factory_that_raises_is_a_failed_check_with_the_users_traceback(tmp_path_factory):
    result, checks = _run(tmp_path_factory, "raises", ("broken.py", RAISES), "build", 1)
    model = checks["serialization.model"]
    assert model["outcome"] == "failed"
    assert model["error"]["type"].endswith("UserModelError")
    assert "build() raised KeyError: 'hidden_size'" in model["error"]["message"]
    assert 'return config["hidden_size"]  # the user\'s bug' in model["error"]["traceback"]
    assert "broken.py" in model["error"]["traceback"]
    assert model["advice"]
    for name in DDP_CHECKS:
        check = checks["serialization." + name]
        assert check["outcome"] == "skipped"
        assert "serialization.model" in check["detail"]
    # Checks that do not need the model still ran.
    assert checks["serialization.pickle_default_group"]["outcome"] == "failed"
    assert "serialization.model" in result.stdout


def test_non_module_on_one_rank_fails_there_and_nothing_hangs(tmp_path_factory):
    _, checks = _run(tmp_path_factory, "notmodule", ("weird.py", NOT_A_MODULE), "build", 1)
    model = checks["serialization.model"]
    assert model["outcome"] == "failed"
    assert model["root_rank"] == 1
    assert "returned dict" in model["error"]["message"]
    assert "not a torch.nn.Module" in model["error"]["message"]
    assert model["ranks"]["0"]["outcome"] == "passed"
    for name in DDP_CHECKS:
        check = checks["serialization." + name]
        assert check["outcome"] == "skipped", check
        assert "rank(s) 1" in check["detail"]


def test_import_error_is_a_failed_check(tmp_path_factory):
    _, checks = _run(tmp_path_factory, "importerror", ("needs.py", IMPORT_ERROR), "build", 1,
                     probes=("serialization", "checkpoint"))
    model = checks["serialization.model"]
    # One broken model, one verdict, whichever probe loaded it.
    assert (model["verdict"], checks["checkpoint.model"]["verdict"]) == \
        ("unexpected", "unexpected")
    assert model["outcome"] == "failed"
    assert "importing" in model["error"]["message"]
    assert "No module named 'not_a_real_module_envcheck'" in model["error"]["message"]
    assert "needs.py" in model["error"]["traceback"]


def test_malformed_model_option_is_a_usage_error(tmp_path):
    result = run_cli("run", "-p", "serialization", "--model", "no-colon-here", cwd=str(tmp_path))
    assert result.code == 2
    assert "--model" in result.stderr
    assert "Traceback" not in result.stderr


HF_LIKE = '''
import collections
import dataclasses

import torch


class Cache:
    """Like transformers' DynamicCache: tensors per layer and a counter, no __eq__."""

    def __init__(self):
        self.key_cache = []
        self.seen_tokens = 0

    def update(self, key):
        self.key_cache.append(key)
        self.seen_tokens += key.shape[-2]


@dataclasses.dataclass
class Output(collections.OrderedDict):
    """Like transformers.utils.ModelOutput: a dataclass that is also an OrderedDict."""

    logits: torch.Tensor = None
    past_key_values: object = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.head = torch.nn.Linear(8, 16)
        self.example_inputs = (torch.tensor([[1, 2, 3]]),)

    def forward(self, ids):
        hidden = self.emb(ids)
        cache = Cache()
        cache.update(hidden)
        return Output(logits=self.head(hidden), past_key_values=cache)


def build():
    torch.manual_seed(0)
    return TinyLM()
'''


def test_a_model_output_with_a_cache_object_compares_as_training_would(tmp_path_factory):
    """A Hugging Face-shaped output (ModelOutput with a KV cache object): the copies'
    outputs are equal tensor by tensor; the cache objects are never compared by
    identity, which used to fail every copy check."""
    result, checks = _run(tmp_path_factory, "hflike", ("lm.py", HF_LIKE), "build", 0,
                          probes=("serialization", "checkpoint"))
    for name in ("deepcopy_ddp", "deepcopy_ddp_module", "pickle_ddp"):
        check = checks["serialization." + name]
        assert (check["outcome"], check["verdict"]) == ("passed", "ok"), check
        assert check["detail"].endswith(", same output")
    assert checks["serialization.fresh_load_state_dict"]["outcome"] == "passed"
    assert checks["checkpoint.model"]["outcome"] == "passed"


def test_difference_says_which_output_and_how_many_elements():
    import torch

    from envcheck.probes.shared.copies import difference

    a = {"logits": torch.zeros(2, 3), "cache": [torch.ones(4), 7]}
    b = {"logits": torch.zeros(2, 3), "cache": [torch.tensor([1.0, 2, 1, 3]), 7]}
    assert difference(a, b, torch) == "output.cache[0]: 2 of 4 elements differ"
    assert difference((torch.zeros(2),), (torch.zeros(3),), torch) == \
        "output[0]: (2,) torch.float32 vs (3,) torch.float32"
    assert difference(torch.tensor([float("nan")]), torch.tensor([float("nan")]),
                      torch) is None
    assert difference({"n": 1}, {"n": 2}, torch) == "output.n: 1 vs 2"
    assert difference(object(), object(), torch) is None  # identity says nothing


TORCHVISION_MODEL = '''
import torch


def build():
    import torchvision  # noqa: F401 - built for another torch than this one
    return torch.nn.Linear(2, 2)
'''


@pytest.fixture(scope="module")
def mismatched_torchvision(tmp_path_factory):
    """PyPI's torchvision 0.29.1 (built for torch 2.14, CUDA) beside this torch: the build
    mismatch users hit. Installed into a directory of its own, without dependencies."""
    import subprocess
    import sys

    target = tmp_path_factory.mktemp("torchvision")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(target), "torchvision==0.29.1"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip("torchvision 0.29.1 cannot be installed here: %s"
                    % proc.stderr.strip().splitlines()[-1:])
    return str(target)


def test_a_torchvision_built_for_another_torch_is_recognised(tmp_path, mismatched_torchvision):
    import importlib.metadata

    model = tmp_path / "vision.py"
    model.write_text(TORCHVISION_MODEL)
    report = tmp_path / "r.json"
    result = run_cli("run", "-p", "serialization", "--model", "%s:build" % model, "--json",
                     str(report), "-q", env={"PYTHONPATH": mismatched_torchvision})
    assert result.code == 1
    check = checks_by_id(load_report(str(report)))["serialization.model"]
    assert check["outcome"] == "failed"
    assert "operator torchvision::nms does not exist" in check["error"]["message"]
    torch_version = importlib.metadata.version("torch")
    assert check["advice"].startswith(
        "torchvision 0.29.1 does not match torch %s: an extension built for another torch "
        "release or variant (CUDA vs CPU) cannot register its operators." % torch_version)
    assert "pip install torch==%s torchvision" % torch_version.split("+")[0] in check["advice"]


@pytest.mark.parametrize("spec,message", [
    ("modles:build", "--model 'modles:build': no module named 'modles' (looked in %s and "
                     "this Python's path)"),
    ("models:buidl", "--model 'models:buidl': models.py has no top-level 'buidl'; did you "
                     "mean 'build'?"),
    ("pkg.sub:build", "--model 'pkg.sub:build': no module named 'pkg' (looked in %s and "
                      "this Python's path)"),
    ("models.py:nope", "--model 'models.py:nope': models.py has no top-level 'nope'"),
])
def test_a_typo_in_model_fails_at_once_in_one_line(tmp_path, spec, message):
    (tmp_path / "models.py").write_text(
        "import torch\n\n\ndef build():\n    return torch.nn.Linear(2, 2)\n\n\n"
        "if __name__ == '__main__':\n    helper = 1\n")
    started = time.monotonic()
    result = run_cli("run", "-p", "serialization", "--model", spec, cwd=str(tmp_path))
    assert result.code == 2 and result.stdout == ""
    expected = message % tmp_path if "%s" in message else message
    assert result.stderr == "envcheck: error: %s\n" % expected
    assert time.monotonic() - started < 30  # no rank started, no suite run


# The page's example as it once stood: example_inputs, but no forward.
NO_FORWARD = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def example_inputs(self):
        return torch.ones(2, 4)


def build():
    return Net()
'''


def test_a_model_without_forward_is_told_so_and_no_copy_is_blamed(tmp_path_factory):
    result, checks = _run(tmp_path_factory, "noforward", ("nofwd.py", NO_FORWARD), "build", 1)
    model = checks["serialization.model"]
    assert model["outcome"] == "failed"
    assert model["error"]["message"].endswith(
        "nofwd.py:build: its forward on example_inputs raised NotImplementedError: Module "
        "[Net] is missing the required \"forward\" function")
    assert "give the model a forward" in model["advice"]
    for name in DDP_CHECKS:  # nothing is blamed on a copy or on the fresh build
        assert checks["serialization." + name]["outcome"] == "skipped", name
    head = " ".join(" ".join(result.stdout.splitlines()[:3]).split())
    assert head.startswith("✗ Your model does not build or run here: ")
    assert "its forward on example_inputs raised NotImplementedError" in head
    assert "building a fresh copy" not in result.stdout
