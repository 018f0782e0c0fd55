"""The nccl probe on a machine without a GPU: NCCL checks skip with a reason in numbers,
the bandwidth measurement runs for real over gloo, with nccl-tests' formulas."""

import os
import re

import pytest

from conftest import checks_by_id, load_report, run_cli
from envcheck.probes import nccl

# A CUDA build of torch (GBs to install) shows the NCCL it bundles even without a GPU;
# point this at one to run that test, e.g. a venv with torch==2.4.1.
CUDA_PYTHON = os.environ.get("ENVCHECK_TEST_CUDA_PYTHON")


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("nccl") / "r.json")
    res = run_cli("run", "-q", "-p", "nccl", "--json", path,
                  env={"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1",
                       "NCCL_SECRET_TOKEN": "hunter2"})
    assert res.code == 0, res.stdout + res.stderr
    return load_report(path)


@pytest.mark.ranks
def test_nccl_checks_skip_with_reason_on_a_cpu_wheel(cpu_report):
    checks = checks_by_id(cpu_report)
    torch_version = cpu_report["environment"]["torch"]
    for name in ("version", "p2p", "init", "collectives"):
        c = checks["nccl." + name]
        assert c["outcome"] == "skipped", c
        assert c["detail"] == "torch %s is a CPU build (torch.version.cuda is None): no NCCL" \
            % torch_version


@pytest.mark.ranks
def test_env_reports_the_nccl_variables_that_are_set(cpu_report):
    c = checks_by_id(cpu_report)["nccl.env"]
    assert c["outcome"] == "passed"
    assert c["detail"].startswith("NCCL_DEBUG=WARN, NCCL_IB_DISABLE=1, "
                                  "NCCL_SECRET_TOKEN=<redacted>")
    assert "hunter2" not in str(c)
    assert c["ranks"]["1"]["data"]["NCCL"]["NCCL_IB_DISABLE"] == "1"


@pytest.mark.ranks
def test_bandwidth_runs_over_gloo_with_nccl_tests_formulas(cpu_report):
    c = checks_by_id(cpu_report)["nccl.bandwidth"]
    assert c["outcome"] == "passed", c
    assert c["seconds"] < 2.0
    data = c["ranks"]["0"]["data"]
    assert data["backend"] == "gloo" and data["ranks"] == 2
    assert data == c["ranks"]["1"]["data"]  # times are the max over ranks, so shared
    rows = data["sizes"]
    assert [r["bytes"] for r in rows] == list(nccl.CPU_SIZES)
    n = data["ranks"]
    for r in rows:
        assert r["wrong"] == 0 and r["count"] == r["bytes"] // 4
        algbw = r["bytes"] / (r["time_us"] * 1e-6) / 1e9
        assert r["algbw_gbs"] == pytest.approx(algbw, rel=1e-3, abs=1e-4)
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * 2 * (n - 1) / n, abs=1e-4)
    peak = max(rows, key=lambda r: r["busbw_gbs"])
    assert data["peak_busbw_gbs"] == peak["busbw_gbs"] > 0
    assert c["detail"].startswith("gloo all_reduce, 2 ranks: peak busbw %.2f GB/s"
                                  % peak["busbw_gbs"])


def test_formulas():
    assert nccl.busbw_factor(1) == 0
    assert nccl.busbw_factor(2) == 1
    assert nccl.busbw_factor(8) == 1.75
    row = nccl.bandwidth_row(1 << 30, 0.01, 8)  # 1 GiB in 10 ms over 8 ranks
    assert row["algbw_gbs"] == pytest.approx(107.3742, abs=1e-4)
    assert row["busbw_gbs"] == pytest.approx(107.3742 * 1.75, abs=1e-3)
    assert nccl.nccl_version_string((2, 21, 5)) == "2.21.5"
    assert nccl.nccl_version_string(2708) == "2.7.8"  # NCCL_VERSION_CODE before 2.9
    assert nccl.nccl_version_string(21903) == "2.19.3"


@pytest.mark.skipif(not CUDA_PYTHON, reason="set ENVCHECK_TEST_CUDA_PYTHON to the python "
                    "of a venv with a CUDA build of torch")
def test_cuda_build_without_gpu_reports_version_and_skips_the_rest(tmp_path):
    path = str(tmp_path / "r.json")
    res = run_cli("run", "-q", "-p", "nccl", "--python", CUDA_PYTHON, "--json", path,
                  cwd=str(tmp_path))
    assert res.code == 0, res.stdout + res.stderr
    checks = checks_by_id(load_report(path))
    version = checks["nccl.version"]
    assert version["outcome"] == "passed"
    assert re.match(r"NCCL \d+\.\d+\.\d+ \(torch \S+, CUDA \d+\.\d+\); not run here: "
                    r"0 CUDA devices visible to rank ", version["detail"]), version["detail"]
    for name in ("init", "collectives"):
        assert checks["nccl." + name]["outcome"] == "skipped"
        assert "0 CUDA devices visible" in checks["nccl." + name]["detail"]
    assert checks["nccl.bandwidth"]["outcome"] == "passed"
