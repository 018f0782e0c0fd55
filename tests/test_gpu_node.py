"""What the first run on a real GPU node (an NVIDIA H200, torch 2.11.0+cu130, NCCL 2.28.9:
dev/gpu_check.sh) showed, kept so that it stays fixed on the CPU machines CI has.

- ``--backend auto`` decided per rank: with more ranks than GPUs, rank 0 took nccl and
  rank 1 gloo, and both waited in init_process_group for the whole timeout (torchrun
  --nproc-per-node 2 on one GPU). The rule is now one answer per host.
- ``--backend nccl --nproc 2`` on one GPU started the ranks; rank 1 failed with "invalid
  device ordinal" and the screen advised checking MASTER_ADDR. It is bad input now, and
  init_process_group's general advice gives way to the cause its error names (a probe's
  own advice stays: tests/test_explain_diagnose.py).
- The real logs of two NCCL ranks on one GPU and of a rank asking for a GPU that is not
  there (tests/data/gpu/) name their cause in ``envcheck explain``.
"""

import json
import os
import shutil
import stat

import pytest

from conftest import ROOT, run_cli

GPU_DATA = os.path.join(ROOT, "tests", "data", "gpu")


@pytest.mark.parametrize("value,count", [
    (None, 2), ("", 0), ("0", 1), ("0,1", 2), ("1,0", 2), ("0,7", 1), ("0,0", 1),
    ("-1", 0), ("0,-1,1", 1), ("3", 0), ("GPU-8a1b,GPU-77cd", 2), ("MIG-1,NoDevFiles", 1),
    ("0, 1", 2),
])
def test_the_gpus_a_rank_sees_follow_cuda_visible_devices(value, count):
    from envcheck.preinstall.discovery import visible

    environ = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert visible(2, environ) == count


@pytest.mark.parametrize("cuda,gpus,nccl,local_ranks,backend", [
    (True, 1, True, 1, "nccl"),
    (True, 1, True, 2, "gloo"),  # the H200 run: both ranks agree on gloo
    (True, 8, True, 8, "nccl"),
    (True, 8, True, 9, "gloo"),
    (True, 8, False, 8, "gloo"),  # a build without NCCL
    (False, 0, True, 1, "gloo"),
])
def test_auto_backend_is_one_answer_for_every_rank_of_a_host(cuda, gpus, nccl, local_ranks,
                                                             backend):
    from envcheck.worker.runtime import auto_backend

    assert auto_backend(cuda, gpus, nccl, local_ranks) == backend


def _one_gpu(tmp_path):
    d = tmp_path / "bin"
    d.mkdir()
    exe = d / "nvidia-smi"
    # nvidia-smi's CSV as the H200 node printed it (index, name, compute_cap, driver, MiB)
    exe.write_text("#!/bin/sh\necho '0, NVIDIA H200, 9.0, 580.159.04, 143771'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return {"PATH": "%s%s%s" % (d, os.pathsep, os.environ.get("PATH", ""))}


def _usage_error(result, fragment):
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envcheck: error: "), result.stderr
    assert fragment in lines[0], lines[0]


@pytest.mark.ranks
def test_nccl_with_more_ranks_than_gpus_is_refused_before_any_rank_starts(tmp_path):
    env = _one_gpu(tmp_path)
    _usage_error(run_cli("run", "--backend", "nccl", "--nproc", "2", env=env),
                 "--backend nccl --nproc 2: NCCL needs a GPU per rank, and 1 is visible "
                 "here; use --nproc 1, or --backend gloo for more ranks on CPU")
    _usage_error(run_cli("run", "--backend", "nccl", env=dict(env, CUDA_VISIBLE_DEVICES="")),
                 "--backend nccl needs a GPU, and CUDA_VISIBLE_DEVICES= hides all 1 here")


def _judged(path):
    """init_process_group of the saved report, judged again with today's matrix."""
    from envcheck import api

    report = api.judge(api.load_report(path), api.load_matrix(()))
    return next(c for c in report.to_dict()["checks"]
                if c["id"] == "setup.init_process_group")


def test_a_check_that_raised_is_advised_by_the_cause_its_error_names(tmp_path):
    """The H200 report of --backend nccl --nproc 2 on one GPU, judged again: the advice
    is the missing GPU's, not init_process_group's own (MASTER_ADDR and WORLD_SIZE)."""
    check = _judged(os.path.join(GPU_DATA, "nccl2.json"))
    assert check["diagnosis"]["signature"] == "device.invalid_ordinal"
    assert check["advice"].startswith("a rank asked for a GPU index this process cannot "
                                      "see"), check["advice"]
    assert "MASTER_ADDR" not in check["advice"]


@pytest.mark.parametrize("log,cause", [
    ("dup_log.txt", "two ranks use the same GPU"),
    ("ordinal_log.txt", "a rank asked for a GPU index this process cannot see"),
])
def test_real_gpu_failure_logs_name_their_cause(tmp_path, log, cause):
    """Logs from the H200 node, never seen when the signatures were written (2 of 2)."""
    copy = tmp_path / log
    shutil.copy(os.path.join(GPU_DATA, log), copy)
    result = run_cli("explain", str(copy))
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[2].startswith("✗ " + cause), result.stdout


def test_a_grow_follow_up_on_a_one_gpu_node_does_not_ask_for_the_nproc_it_has():
    from envcheck.core import plan
    from envcheck.probes import catalog

    fsdp = [s for s in catalog.builtin_probes() if s.name == "fsdp"]
    grow = plan.follow_ups(fsdp, 1, max_ranks=1)[0]
    assert grow["skip"] == ("not run: 2 ranks need 2 GPUs, this machine has 1; it needs a "
                            "machine with 2 GPUs, or the ranks on CPU (--backend gloo)")


def test_a_fabric_job_that_died_before_the_copy_is_explained_by_its_own_error():
    """On the H200 node Fabric's own launcher died in MPI_Init (Lightning's MPI
    detection imports the installed mpi4py). The probe now leaves the copy's advice out
    when the job never reached fabric.setup (as here: advice None), and the failure's
    text names the cause."""
    from envcheck import api

    report = api.load_report(os.path.join(GPU_DATA, "lightning.json"))
    check = next(c for c in report.checks if c.id == "frameworks.lightning_own_launcher")
    check.advice = None  # what probes/frameworks/fabric.py leaves for a job before setup
    api.judge(report, api.load_matrix(()))
    assert check.verdict == "unexpected"
    assert check.diagnosis["signature"] == "launch.mpi_init_abort"
    assert check.advice.startswith("MPI could not start in this process"), check.advice
    first, note = check.advice.splitlines()
    assert "deepcopy" not in first
    assert note.startswith("the matrix expects a different failure here")
