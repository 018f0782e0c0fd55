"""envcheck run end to end: real ranks, real gloo groups, the table and the JSON report."""

import json
import re

import pytest

from conftest import checks_by_id, load_report, run_cli, validate_report

pytestmark = pytest.mark.ranks  # every test here starts real ranks

LAUNCH = ["launch.env", "launch.rank_mapping", "launch.device", "launch.unique_device",
          "launch.cuda_visible_devices", "launch.slurm"]
COLLECTIVES = ["collectives.init", "collectives.all_reduce", "collectives.broadcast",
               "collectives.all_gather", "collectives.all_gather_object",
               "collectives.barrier"]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    path = out / "report.json"
    result = run_cli("run", "-p", "launch", "-p", "collectives", "--json", str(path),
                     env={"TORCH_HUB_TOKEN": "s3cr3t-value", "NCCL_DEBUG": "WARN"})
    return result, path


def test_exit_code_and_checks(default_run):
    result, path = default_run
    assert result.code == 0, result.stdout + result.stderr
    data = load_report(path)
    ids = [c["id"] for c in data["checks"]]
    assert ids == ["setup.import_torch", "setup.open_files", "setup.processes",
                   "setup.tmpdir", "setup.master_addr", "setup.socket_interface",
                   "setup.init_process_group"] + LAUNCH + COLLECTIVES
    checks = checks_by_id(data)
    for cid in COLLECTIVES + ["launch.env", "launch.rank_mapping"]:
        assert checks[cid]["outcome"] == "passed", checks[cid]
        assert set(checks[cid]["ranks"]) == {"0", "1"}
    # CPU: device checks are skipped with the reason, not passed vacuously.
    assert checks["launch.device"]["outcome"] == "skipped"
    assert "CPU" in checks["launch.device"]["detail"]
    assert data["plan"]["nproc"] == 2
    assert [r["backend"] for r in data["ranks"]] == ["gloo", "gloo"]
    assert data["summary"]["failed"] == 0


def test_environment_is_collected_and_secrets_redacted(default_run):
    _, path = default_run
    env = load_report(path)["environment"]
    import torch  # the test process may import torch: it is not the supervisor
    assert env["torch"] == torch.__version__
    assert env["python"] and env["glibc"] and env["os"]
    assert env["env"]["TORCH_HUB_TOKEN"] == "<redacted>"
    assert env["env"]["NCCL_DEBUG"] == "WARN"
    assert "s3cr3t-value" not in path.read_text()


def test_table_screen(default_run):
    result, _ = default_run
    out = result.stdout
    lines = out.rstrip().splitlines()
    # The answer first, then the environment and a line per probe; the count last.
    assert re.fullmatch(r"✓ Ready for distributed training: backend gloo, 2 ranks on \S+",
                        lines[0])
    assert "torch " in out and "CUDA / cuDNN / NCCL" in out
    assert re.search(r"^✓ collectives    6 passed  \d+\.\d\d s$", out, re.M)
    assert "collectives  all_reduce" not in out  # the rows are -v's
    assert re.fullmatch(r"nothing unexpected: 16 passed, 3 skipped in \d+\.\d s", lines[-1])
    verbose = run_cli("report", "-v", str(default_run[1])).stdout
    assert "collectives  all_reduce" in verbose
    assert "✓ passed" in verbose and "- skipped" in verbose
    # Not a terminal: progress comes as plain lines on stderr, never on stdout.
    assert "envcheck: probe collectives" in result.stderr
    assert "envcheck: probe" not in out


def test_report_renders_a_saved_report_identically(default_run):
    result, path = default_run
    again = run_cli("report", str(path))
    assert again.code == 0
    assert again.stdout == result.stdout
    as_json = run_cli("report", str(path), "--format", "json")
    assert json.loads(as_json.stdout) == json.loads(path.read_text())


def test_format_json_on_stdout_and_three_ranks(tmp_path):
    result = run_cli("run", "--nproc", "3", "-p", "collectives", "--format", "json", "-q")
    assert result.code == 0, result.stderr
    data = validate_report(json.loads(result.stdout))
    checks = checks_by_id(data)
    assert checks["collectives.all_reduce"]["detail"] == "SUM and MAX over 3 ranks"
    assert set(checks["collectives.all_gather"]["ranks"]) == {"0", "1", "2"}
    assert result.stderr == ""  # --quiet


def test_skip_leaves_out_a_probe():
    result = run_cli("run", "--skip", "collectives", "-p", "launch", "--skip", "launch")
    assert result.code == 2
    assert "no probe left" in result.stderr
