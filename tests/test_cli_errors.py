"""Bad input: one line on stderr, exit 2, no traceback, and no file left behind."""

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory):
    venv = tmp_path_factory.mktemp("notorch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def assert_usage_error(result, *fragments):
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("envcheck: error: ")
    assert "Traceback" not in result.stderr + result.stdout
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("args,fragments", [
    (["run", "-p", "nope"], ["unknown probe 'nope'", "launch", "collectives"]),
    (["run", "--skip", "nope"], ["unknown probe 'nope'"]),
    (["run", "--nproc", "0"], ["--nproc 0", "at least 1"]),
    (["run", "--nproc", "two"], ["--nproc", "integer"]),
    (["run", "--timeout", "0"], ["--timeout 0"]),
    (["run", "--backend", "mpi"], ["--backend 'mpi'", "gloo"]),
    (["run", "--backend", "nccl"], ["nccl needs NVIDIA GPUs"]),
    (["run", "--format", "yaml"], ["--format 'yaml'"]),
    (["run", "--master-port", "70000"], ["70000"]),
    (["run", "--python", "/no/such/python"], ["no such file"]),
    (["run", "--python", "/tmp"], ["not an executable file"]),
    (["run", "--python", "no-such-interpreter-anywhere"], ["not found on PATH"]),
    (["run", "--model", "no_colon_here"], ["MODULE:FACTORY"]),
    (["run", "--model", "missing/file.py:build"], ["no such file"]),
    (["run", "--no-such-flag"], ["No such option", "--no-such-flag"]),
    (["report", "/no/such/report.json"], ["no such file"]),
    (["frobnicate"], ["frobnicate"]),
])
def test_bad_flags(args, fragments):
    assert_usage_error(run_cli(*args), *fragments)


def test_python_without_torch(python_without_torch):
    result = run_cli("run", "--python", python_without_torch)
    assert_usage_error(result, "torch is not installed for", python_without_torch,
                       "-m pip install torch")


@pytest.mark.parametrize("where", ["missing_dir/r.json", "a_dir"])
def test_unwritable_json_path_fails_before_running(tmp_path, where):
    (tmp_path / "a_dir").mkdir()
    target = tmp_path / where
    result = run_cli("run", "--json", str(target), "-p", "launch")
    assert_usage_error(result, str(target))
    assert "torch imported" not in result.stderr  # refused before any rank started
    assert sorted(os.listdir(tmp_path)) == ["a_dir"]
    assert os.listdir(tmp_path / "a_dir") == []


@pytest.mark.parametrize("content,fragment", [
    ("{not json", "is not a JSON report"),
    ("[]", "top level is list"),
    (json.dumps({"schema_version": 99}), "schema_version is 99"),
    (json.dumps({"schema_version": 1, "checks": []}), "missing"),
    ("", "is not a JSON report"),
])
def test_corrupt_reports(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert_usage_error(run_cli("report", str(path)), fragment)


def test_no_arguments_prints_help():
    result = run_cli()
    assert result.code == 0
    assert "Commands" in result.stdout and "run" in result.stdout
