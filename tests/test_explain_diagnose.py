"""envcheck run and report explain their own failing checks with the same signatures as
envcheck explain: a GPU-only failure is tested by re-judging real texts (a saved report
whose check failed with an error a user posted), a CPU one by a real run."""

import json
import textwrap

import pytest

from conftest import checks_by_id, load_report, run_cli, validate_report
from envcheck import __version__
from envcheck.explain import diagnose
from envcheck.matrix import load as matrix_load
from envcheck.report import model as report_mod

# https://github.com/NVIDIA/Megatron-LM/issues/661 (tests/data/explain_corpus.toml)
DUPLICATE_GPU = ("NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
                 "ProcessGroupNCCL.cpp:1727, invalid usage (run with NCCL_DEBUG=WARN for "
                 "details), NCCL version 2.19.3\nncclInvalidUsage: This usually reflects "
                 "invalid usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 3 "
                 "and rank 0 both on CUDA device f000")
# https://github.com/NVIDIA/nccl/issues/1589
SHM = ("g148:14937:69361 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared "
       "memory segment /dev/shm/nccl-glnlGK (size 14156128), error: No such file or "
       "directory (2)")


def _report(checks, frameworks=None):
    env = {"torch": "2.4.1+cu121", "cuda": "12.1", "python": "3.11.9",
           "os": "Linux-5.15-x86_64-with-glibc2.35", "frameworks": frameworks or {}}
    return report_mod.Report(__version__, "2026-11-23T00:00:00+00:00", {"options": {}}, env,
                             [{"rank": 0, "backend": "nccl"}], checks, 1.0)


def _nccl_init(error_message, stderr_tail=""):
    return report_mod.CheckResult(
        "nccl", "init", "failed", 1.0, "init failed on rank 1", None,
        {"type": "torch.distributed.DistBackendError", "message": error_message,
         "traceback": ""}, 1,
        {"1": {"outcome": "failed", "detail": "", "stderr_tail": stderr_tail}})


def test_gpu_failure_is_diagnosed_from_a_real_nccl_text():
    matrix = matrix_load.load()
    report = _report([_nccl_init(DUPLICATE_GPU), _nccl_init("boom", stderr_tail=SHM)])
    from envcheck.matrix import verdicts

    verdicts.apply(report, matrix)
    diagnose.diagnose(report, matrix)
    dup, shm = report.checks
    assert dup.verdict == "failure"
    assert dup.diagnosis["signature"] == "nccl.duplicate_gpu"
    assert dup.diagnosis["line"] == ("Duplicate GPU detected : rank 3 and rank 0 both on "
                                     "CUDA device f000")
    assert dup.diagnosis["gpu_only"] is True
    assert dup.advice.startswith("two ranks use the same GPU: each rank must have a device "
                                 "of its own (cuda:LOCAL_RANK): call torch.cuda.set_device(")
    assert "source: https://github.com/NVIDIA/nccl/issues/1241" in dup.advice
    # the stderr tail of a rank counts too
    assert shm.diagnosis["signature"] == "nccl.shm_attach"


def test_known_and_passing_checks_get_no_diagnosis():
    matrix = matrix_load.load()
    ok = report_mod.CheckResult("nccl", "version", "passed", 0.1, "2.20.5")
    report = _report([ok])
    from envcheck.matrix import verdicts

    verdicts.apply(report, matrix)
    diagnose.diagnose(report, matrix)
    assert report.checks[0].diagnosis is None and report.checks[0].advice is None


PROBE = textwrap.dedent('''
    """A custom probe whose model keeps its process group, deep-copied (a real error)."""
    CHECKS = ("ema",)

    def probe_ema_copy(ctx):
        import copy

        import torch
        import torch.distributed as dist

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.group = dist.new_group(list(range(ctx.world_size)))

        model = Block()
        with ctx.check("ema"):
            copy.deepcopy(model)
''')


@pytest.fixture(scope="module")
def ema_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ema")
    probe = tmp / "ema_probe.py"
    probe.write_text(PROBE)
    out = tmp / "r.json"
    res = run_cli("run", "--probe-path", str(probe), "-p", "ema_copy", "-q", "--json", str(out))
    assert res.code == 1, res.stderr
    return load_report(out)


@pytest.mark.ranks
def test_real_run_diagnoses_its_own_failure(ema_run):
    check = checks_by_id(ema_run)["ema-copy.ema"]
    assert (check["outcome"], check["verdict"]) == ("failed", "failure")
    assert check["diagnosis"]["signature"] == "torch.pickle_process_group"
    assert check["diagnosis"]["line"] == ("TypeError: cannot pickle "
                                          "'torch._C._distributed_c10d.ProcessGroup' object")
    assert check["diagnosis"]["advice"].startswith(
        "do not deepcopy a model that stores a process group")
    # the probe's own advice names what it saw, and stays
    assert check["advice"].startswith("a process group cannot be pickled or deep-copied")


@pytest.mark.ranks
def test_saved_report_is_diagnosed_when_rendered(ema_run, tmp_path):
    # The run's report, as if its check had been NCCL's init failing on a GPU node with
    # a user's real error, and never judged: envcheck report judges it on rendering.
    data = json.loads(json.dumps(ema_run))
    data["matrix"] = None
    check = checks_by_id(data)["ema-copy.ema"]
    check.update(probe="nccl", check="init", id="nccl.init", advice=None, verdict=None,
                 diagnosis=None, expectation=None,
                 error={"type": "torch.distributed.DistBackendError",
                        "message": DUPLICATE_GPU, "traceback": ""})
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(data))
    res = run_cli("report", str(path), "--format", "json")
    assert res.code == 1, res.stderr
    judged = checks_by_id(validate_report(json.loads(res.stdout)))["nccl.init"]
    assert judged["verdict"] == "failure"
    assert judged["diagnosis"]["signature"] == "nccl.duplicate_gpu"
    assert judged["diagnosis"]["sources"] == [
        "https://github.com/NVIDIA/nccl/issues/1241 (maintainer: 'you're trying to launch "
        "multiple NCCL ranks on the same CUDA device, which NCCL doesn't support')"]
    assert judged["advice"].startswith("two ranks use the same GPU")
