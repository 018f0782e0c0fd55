"""FSDP's own refusals, read by explain (issue #34, phase AD: batch 37's
axolotl-ai-cloud/axolotl#1559 and facebookresearch/dinov2#134). The mixed-dtype refusal is
real: FSDP wraps a module of two dtypes in a one-rank gloo job here, and the same job of
one dtype wraps it."""

import subprocess
import sys

import pytest

from envcheck.explain import explainer as command
from envcheck.matrix import load as matrix_load

pytestmark = pytest.mark.ranks

WRAP = '''
import os, sys, torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
model[0].to(getattr(torch, sys.argv[2]))  # the LayerNorm stays float32
FSDP(model, device_id=torch.device("cpu"))
dist.destroy_process_group()
print("wrapped")
'''


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def _wrap(dtype):
    from envcheck.run.supervisor import free_port
    return subprocess.run([sys.executable, "-c", WRAP, str(free_port()), dtype],
                          capture_output=True, text=True, timeout=180)


def _explain(text, tmp_path, matrix):
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    return [f.signature.id for f in command.explain([str(log)], matrix=matrix).findings]


def test_fsdp_of_a_module_of_two_dtypes_is_the_mixed_dtype_cause(tmp_path, matrix):
    proc = _wrap("bfloat16")
    assert proc.returncode == 1 and "wrapped" not in proc.stdout
    assert proc.stderr.rstrip().splitlines()[-1] == (
        "[rank0]: ValueError: Must flatten tensors with uniform dtype but got "
        "torch.bfloat16 and torch.float32")
    assert _explain(proc.stderr, tmp_path, matrix) == ["torch.fsdp_mixed_dtype"]
    # one dtype: FSDP wraps it
    proc = _wrap("float32")
    assert proc.returncode == 0 and proc.stdout.strip() == "wrapped", proc.stderr


@pytest.mark.parametrize("text", [
    # FlatParamHandle's other refusals: not the dtype
    "ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params="
    "False`\n",
    "ValueError: Must flatten tensors on the same device but got both cpu and cuda:0\n",
], ids=["requires-grad", "device"])
def test_fsdps_other_flattening_refusals_are_not_it(text, tmp_path, matrix):
    assert "torch.fsdp_mixed_dtype" not in _explain(text, tmp_path, matrix)
