"""The structure of a log read before its text (issue #34): a real 4-rank torchrun job
made here, where rank 2 raises in its own code and the ranks waiting for it in an
all_reduce die of gloo's "Connection closed by peer", comes out as rank 2's own error
first (its file and line), and the other ranks' errors and torchrun's summary as
consequences. Plus input that is not a log, and the screen's width."""

import os
import subprocess
import sys

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

from conftest import ROOT, run_cli
from envcheck.explain import explainer as command
from envcheck.render import explanation as render

SCRIPT = os.path.join(ROOT, "tests", "data", "explain", "torchrun_user_error.py")
KEPT = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-user-error.log")


def _bug_line():
    with open(SCRIPT, encoding="utf-8") as f:
        return next(i for i, text in enumerate(f, 1) if "with open(path)" in text)


def _check_user_error(result, script):
    first = result.findings[0]
    assert first.signature.id == "program.exception"
    assert first.ranks == {2}
    assert first.exception.type == "FileNotFoundError"
    assert first.exception.culprit == (script, _bug_line(), "load_labels")
    assert "%s:%d (in load_labels)" % (script, _bug_line()) in first.signature.cause
    assert "not in the environment" in first.signature.cause
    # nothing the environment did is named: the rest are consequences
    assert [f.signature.id for f in result.findings] == ["program.exception"]
    ids = [f.signature.id for f in result.consequences]
    assert "launch.child_failed" in ids
    peer = [f for f in result.consequences if f.signature.id == "torch.peer_closed"]
    assert peer and peer[0].ranks and peer[0].ranks <= {0, 1, 3}
    assert all(f.signature.symptom for f in result.consequences)
    assert result.structure[0].startswith("first failure (torchrun's Root Cause): rank 2")
    assert int(result.exit_code) == 0


@pytest.mark.ranks
def test_real_4_rank_torchrun_user_error_is_the_first_rank_and_its_own_error(tmp_path):
    log = tmp_path / "job.log"
    with open(log, "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                               "--nproc_per_node", "4", "--tee", "3", SCRIPT],
                              stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=280)
    assert proc.returncode != 0
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "Connection closed by peer" in text and "Root Cause" in text
    _check_user_error(command.explain([str(log)]), SCRIPT)


def test_the_kept_run_of_it_explains_the_same():
    # the same job's log, kept (run from this worktree: the script's path is as it ran)
    with open(KEPT, encoding="utf-8") as f:
        ran = next(line for line in f if "torchrun_user_error.py\", line" in line)
    script = ran.split('File "')[1].split('"')[0]
    _check_user_error(command.explain([KEPT]), script)


@pytest.mark.parametrize("content,fragment", [
    (b"", "is empty"),
    (bytes(range(256)) * 40, "holds binary data"),
    (os.urandom(4096).replace(b"\x00", b"\x01"), "holds binary data"),
], ids=["empty", "every-byte", "random"])  # the same ids in every xdist worker
def test_input_that_is_not_a_log_is_one_line_exit_2(tmp_path, content, fragment):
    log = tmp_path / "job.log"
    log.write_bytes(content)
    res = run_cli("explain", str(log))
    assert res.code == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envcheck: error: %s " % log)
    assert fragment in lines[0] and "Traceback" not in res.stderr + res.stdout


def test_on_a_terminal_lines_fit_and_no_word_or_url_is_split(monkeypatch):
    # the log named as a user names it, relative: a path longer than a line (this
    # checkout's absolute one can be) overflows it whole, never split
    monkeypatch.chdir(ROOT)
    result = command.explain([os.path.relpath(KEPT, ROOT)])
    text = render.render(result, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    words = {w for line in render.render(result).splitlines() for w in line.split()}
    assert all(w in words for line in text.splitlines() for w in line.split())
    # to a pipe: whole lines
    assert any(len(line) > 80 for line in render.render(result).splitlines())


def test_the_watchdog_says_which_collective_timed_out_on_which_ranks(tmp_path):
    # https://github.com/hiyouga/LlamaFactory/issues/2424, a training log of
    # tests/data/explain_unseen.toml: ranks 1-3 timed out in all-reduce SeqNum=2 while
    # rank 0 was still tokenising
    with open(os.path.join(ROOT, "tests", "data", "explain_unseen.toml"), "rb") as f:
        entry = next(e for e in tomllib.load(f)["entry"]
                     if e["source"].endswith("LlamaFactory/issues/2424"))
    assert entry["split"] == "train"
    log = tmp_path / "job.log"
    log.write_text(entry["text"], encoding="utf-8")
    result = command.explain([str(log)])
    assert [f.signature.id for f in result.findings] == ["nccl.watchdog_timeout"]
    assert result.structure == ["watchdog: collective ALLREDUCE SeqNum=2 timed out on ranks 1–3"]


SCHEMA = os.path.join(ROOT, "envcheck", "report", "schema", "explain.schema.json")


def _validated_json(*args):
    import json

    import jsonschema

    res = run_cli("explain", "--format", "json", *args)
    assert res.code == 0, res.stderr
    data = json.loads(res.stdout)
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.validate(data, schema)
    return data, schema


def test_json_of_the_programs_error_matches_the_schema():
    data, _ = _validated_json(KEPT)
    first = data["findings"][0]
    assert first["id"] == "program.exception" and first["ranks"] == [2]
    assert "FileNotFoundError" in first["cause"] and first["caught_by"] == []


def test_json_carries_the_structure_first_rank_its_own_error_and_the_others():
    """The structure the screen shows under 'how the job failed' is in the JSON too, and
    the schema describes it: torchrun's first failing rank, each rank's first exception
    (rank 2's own FileNotFoundError, the program's; ranks 1 and 3's closed connection,
    not the program's), and the program error's frame."""
    import jsonschema

    data, schema = _validated_json(KEPT)
    with open(KEPT, encoding="utf-8") as f:
        ran = next(line for line in f if "torchrun_user_error.py\", line" in line)
    script = ran.split('File "')[1].split('"')[0]
    structure = data["structure"]
    assert structure["first_failure"]["rank"] == 2
    assert structure["first_failure"]["exitcode"] == 1
    assert structure["summary"][0].startswith("first failure (torchrun's Root Cause): rank 2")
    assert structure["collectives"] == [] and structure["behind"] is None
    by_rank = {e["rank"]: e for e in structure["rank_first_errors"]}
    assert by_rank[2]["type"] == "FileNotFoundError" and by_rank[2]["program"] is True
    assert by_rank[2]["frame"] == {"path": script, "line": _bug_line(),
                                   "function": "load_labels", "own_code": True}
    assert {1, 3} <= set(by_rank) and 2 not in by_rank[1]["ranks"]
    assert all(by_rank[r]["program"] is False for r in by_rank if r != 2)
    first = data["findings"][0]
    assert first["exception"]["type"] == "FileNotFoundError"
    assert first["exception"]["frame"]["function"] == "load_labels"
    assert all(c["exception"] is None for c in data["consequences"])
    # the schema holds the structure to its shape: an unknown key is refused
    by_rank[2]["extra"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_json_carries_the_watchdogs_collectives(tmp_path):
    # the LlamaFactory#2424 training log above: ranks 1-3 timed out in ALLREDUCE SeqNum=2
    with open(os.path.join(ROOT, "tests", "data", "explain_unseen.toml"), "rb") as f:
        entry = next(e for e in tomllib.load(f)["entry"]
                     if e["source"].endswith("LlamaFactory/issues/2424"))
    log = tmp_path / "job.log"
    log.write_text(entry["text"], encoding="utf-8")
    data, _ = _validated_json(str(log))
    assert data["structure"]["collectives"] == [{"op": "ALLREDUCE", "seq": 2,
                                                 "ranks": [1, 2, 3]}]
    assert data["structure"]["behind"] is None
    assert data["findings"][0]["exception"] is None
