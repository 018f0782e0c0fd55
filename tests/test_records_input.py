"""`envcheck report --records` reads files anyone could have left: each hostile input is
one line and exit 2, never a hang, a traceback or memory without end."""

import json
import os

import pytest

from conftest import run_cli

LAUNCH = {"t": "launch", "rank": 0, "time": 1764000000.0, "launcher": "torchrun",
          "world_size": 2, "run_id": "x",
          "plan": {"backend": "gloo", "timeout": 60, "probes": [], "options": {}}}


def _records(tmp_path, **launch):
    (tmp_path / "records-rank0.jsonl").write_text(json.dumps(dict(LAUNCH, **launch)) + "\n")
    return tmp_path


def _refused(tmp_path, line):
    result = run_cli("report", "--records", str(tmp_path), timeout=60)
    assert result.code == 2, result.stdout + result.stderr
    assert result.stderr == "envcheck: error: %s\n" % line
    assert result.stdout == ""


def test_a_fifo_with_no_writer_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "records-rank0.jsonl")
    _refused(tmp_path, "cannot read %s: a FIFO, not a file"
             % (tmp_path / "records-rank0.jsonl"))


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_record_file_linked_to_a_device_is_refused(tmp_path, device):
    os.symlink(device, tmp_path / "records-rank0.jsonl")
    _refused(tmp_path, "cannot read %s: a character device, not a file"
             % (tmp_path / "records-rank0.jsonl"))


@pytest.mark.parametrize("world", [10 ** 9, "four", 0, -3, True, 2.5, None])
def test_a_world_size_no_job_has_is_one_line(tmp_path, world):
    _refused(_records(tmp_path, world_size=world),
             "the launch record's world_size %r is not a job's number of ranks (1 to "
             "1048576): these are not records envcheck wrote" % (world,))


def test_a_timeout_or_a_time_that_is_not_a_number_is_one_line(tmp_path):
    _records(tmp_path, time="yesterday",
             plan={"backend": "gloo", "timeout": "soon", "probes": [], "options": {}})
    result = run_cli("report", "--records", str(tmp_path), timeout=60)
    assert result.code == 2
    assert result.stderr.startswith("envcheck: error: %s is not an envcheck report this "
                                    "envcheck can show: a field is malformed" % tmp_path)
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
