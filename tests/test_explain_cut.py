"""A log that ends inside a traceback, before its exception line (issue #34, phase S):
a log copied or excerpted short, or a process killed while it printed. Five of batches
21 and 22's misses were such logs. The error is not in the log; where the job was is, and
what to collect is the rest of it.

The tracebacks here are real: a job of two files (its own train.py, and a library under
site-packages) raises, and its stderr is cut where a paste would cut it. So is torch's
warning that only reentrant activation checkpointing prints.
"""

import io
import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from envcheck.explain import explainer as command, read
from envcheck.matrix import load as matrix_load

LIBRARY = '''
def step(batch):
    return _forward(batch)


def _forward(batch):
    return batch["labels"]
'''

TRAIN = '''
import sys
sys.path.insert(0, sys.argv[1])
from somelib import core


def main():
    core.step({})


main()
'''


@pytest.fixture(scope="module")
def matrix():
    return matrix_load.load()


def _installed(root, source):
    """somelib, its core.py ``source``, under a site-packages in ``root``: (that
    site-packages, core.py)."""
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "somelib").mkdir(parents=True)
    (site / "somelib" / "__init__.py").write_text("")
    core = site / "somelib" / "core.py"
    core.write_text(source)
    return site, core


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """(the job's stderr lines as Python printed them, train.py, the library's file)."""
    root = tmp_path_factory.mktemp("job")
    site, core = _installed(root, LIBRARY)
    train = root / "train.py"
    train.write_text(TRAIN)
    proc = subprocess.run([sys.executable, str(train), str(site)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "KeyError: 'labels'"
    return lines, str(train), str(core)


def _explain(text, tmp_path, matrix):
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    return command.explain([str(log)], matrix=matrix), str(log)


def test_the_whole_traceback_is_the_programs_error_and_no_cut(job, tmp_path, matrix):
    lines, train, core = job
    result, _ = _explain("\n".join(lines) + "\n", tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["program.exception"]
    assert result.cut == [] and result.structure_data["cut_tracebacks"] == []


def test_a_traceback_cut_before_its_error_line_says_where_the_job_was(job, tmp_path, matrix):
    lines, train, core = job
    result, log = _explain("\n".join("[rank1]: " + ln for ln in lines[:-1]) + "\n",
                           tmp_path, matrix)
    assert result.findings == [] and int(result.exit_code) == 1
    step = next(i for i, t in enumerate(LIBRARY.splitlines(), 1) if "return batch" in t)
    call = next(i for i, t in enumerate(TRAIN.splitlines(), 1) if "core.step" in t)
    assert result.structure == [
        "the log ends inside rank 1's traceback (%s:%d), cut before its error line, which "
        "says what failed: its last frame is in somelib's code at %s:%d (in _forward), "
        "called from the job's own code at %s:%d (in main)"
        % (log, len(lines) - 1, core, step, train, call)]
    assert result.structure_data["cut_tracebacks"] == [{
        "file": log, "line_number": len(lines) - 1, "rank": 1, "whole": True,
        "frames": 4, "frame": {"path": core, "line": step, "function": "_forward",
                               "library": "somelib"},
        "called_from": {"path": train, "line": call, "function": "main"}}]


def test_every_cut_inside_the_traceback_is_read_and_no_cut_outside_it(job, tmp_path, matrix):
    """Cut after each of its lines: inside the frames, a cut whose last frame is the
    deepest one shown so far; after its first line only, or with its error line, none."""
    lines, train, core = job
    frames = [i for i, t in enumerate(lines) if t.lstrip().startswith("File ")]
    for end in range(1, len(lines) + 1):
        result, _ = _explain("\n".join(lines[:end]) + "\n", tmp_path, matrix)
        shown = [i for i in frames if i < end]
        if not shown or end == len(lines):
            assert result.cut == [], end
            continue
        (cut,) = result.cut
        assert len(cut.frames) == len(shown), end
        assert cut.last == cut.frames[-1] and cut.line_number == end


def test_a_traceback_pasted_in_reverse_is_whole_not_cut(job, tmp_path, matrix):
    """Its exception line first, then its frames innermost first: nothing is missing."""
    lines, train, core = job
    pairs = [lines[i:i + 2] for i in range(1, len(lines) - 1, 2)]
    text = "\n".join([lines[-1]] + [ln for pair in reversed(pairs) for ln in pair]) + "\n"
    result, _ = _explain(text, tmp_path, matrix)
    assert result.cut == []
    assert [f.signature.id for f in result.findings] == ["program.exception"]


LAUNCHER_CUT = (
    "train.py: error: unrecognized arguments: --local-rank=0\n"
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 2) local_rank: 0 "
    "(pid: 118494) of binary: /usr/bin/python\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.8/runpy.py", line 194, in _run_module_as_main\n'
    "    return _run_code(code, main_globals, None,\n")


def test_a_launchers_own_cut_traceback_beside_a_cause_adds_nothing(tmp_path, matrix):
    result, _ = _explain(LAUNCHER_CUT, tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["launch.local_rank_argument"]
    assert result.cut == [] and result.structure == []
    # alone, it is all the log says
    result, log = _explain(LAUNCHER_CUT.split("\n", 2)[2], tmp_path, matrix)
    assert result.findings == []
    assert result.structure == [
        "the log ends inside a traceback (%s:3), cut before its error line, which says what "
        "failed: its last frame is at /usr/lib/python3.8/runpy.py:194 (in "
        "_run_module_as_main)" % log]


def test_the_cut_is_read_at_the_end_of_a_long_log_read_in_chunks(job):
    """Only the log's last bytes are kept (read.TAIL), whatever its size; a traceback
    that ends it is whole in them, across the chunks it was read in."""
    lines, train, core = job
    body = b"".join(b"step %d loss 0.5\n" % i for i in range(200000))
    stream = io.BytesIO(body + ("\n".join(lines[:-1]) + "\n").encode())
    scan = read.Scan(stream, chunk=4096)
    for _ in scan:
        pass
    tail = scan.tail()
    assert sum(len(t) + 1 for t in tail) <= read.TAIL
    assert [t.decode() for t in tail[-len(lines):]] == lines[:-1] + [""]
    assert tail[0].startswith(b"step ")  # whole lines only: the cut first one left out


def test_the_screen_and_the_json_say_what_to_collect(job, tmp_path):
    lines, train, core = job
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    report = tmp_path / "explain.json"
    res = run_cli("explain", str(log), "--json", str(report), env={"COLUMNS": "80"})
    assert res.code == 1, res.stderr
    first = ("the rest of the log, after line %d of %s: it ends inside a traceback, and the "
             "line below the traceback's last frame (the exception) names what failed"
             % (len(lines) - 1, log))
    with open(report, encoding="utf-8") as f:
        data = json.load(f)
    assert data["next_steps"][0] == first
    screen = res.stdout.splitlines()
    assert screen[screen.index("collect next:") + 1] == "  - " + first


CHECKPOINTED = '''
import torch
from torch.utils.checkpoint import checkpoint

block = torch.nn.Linear(4, 4)
x = torch.randn(2, 4)  # an input that needs no gradient (frozen embeddings, LoRA)
checkpoint(block, x, use_reentrant=%s)
'''


def _warnings(reentrant):
    proc = subprocess.run([sys.executable, "-W", "always", "-c",
                           CHECKPOINTED % reentrant], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_torchs_reentrant_warning_before_a_cut_traceback_is_the_reentrant_guess(
        job, tmp_path, matrix):
    """torch prints the warning in its reentrant mode only (observed here, both modes);
    read alone, before a rank's traceback cut short, it is a guess worded as one."""
    warned = _warnings(True)
    assert "UserWarning: None of the inputs have requires_grad=True" in warned
    assert "None of the inputs" not in _warnings(False)
    lines, train, core = job
    result, _ = _explain(warned + "\n".join(lines[:-1]) + "\n", tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["torch.ddp_reentrant_checkpoint"]
    assert result.findings[0].cause.startswith("possibly reentrant activation checkpointing")
    assert len(result.cut) == 1  # and where the job was
    # with the job's error line in the log, the error is what the log states
    result, _ = _explain(warned + "\n".join(lines) + "\n", tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["program.exception"]


# A script started with plain python: init_process_group's env:// rendezvous finds no
# launcher's variables
NO_LAUNCHER = '''
import torch.distributed as dist
dist.init_process_group("gloo")
'''


@pytest.mark.parametrize("missing", ["RANK", "MASTER_ADDR"])
def test_torchs_refusal_of_a_launchers_variable_cut_before_its_error_is_the_launcher_guess(
        missing, tmp_path, matrix):
    """torch 2.13 raises in _get_env_or_raise("VAR"), whose raise names no variable: the
    caller's line does (hzwer/ECCV2022-RIFE#52 is torch 1.x's 'raise
    _env_error("MASTER_ADDR")'). Whole, the error line says it; cut before it, the
    traceback's last lines are the guess, worded as one."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")}
    if missing == "MASTER_ADDR":
        env.update(RANK="0", WORLD_SIZE="1")
    proc = subprocess.run([sys.executable, "-c", NO_LAUNCHER], capture_output=True,
                          text=True, timeout=120, env=env)
    lines = proc.stderr.rstrip().splitlines()
    assert lines[-1].endswith("environment variable %s expected, but not set" % missing), \
        proc.stderr
    assert '_get_env_or_raise("%s")' % missing in proc.stderr
    result, _ = _explain("\n".join(lines) + "\n", tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["launch.no_launcher_env"]
    assert not result.findings[0].alone
    result, _ = _explain("\n".join(lines[:-1]) + "\n", tmp_path, matrix)
    assert [f.signature.id for f in result.findings] == ["launch.no_launcher_env"]
    assert result.findings[0].alone and result.findings[0].cause.startswith("likely ")


# A library whose code raises with a literal message, and one whose message is built (an
# f-string): the statement shown last says the first's words, not the second's
RAISES = '''
def step(batch):
    if not batch:
        raise RuntimeError('somelib does not support an empty batch - see its docs')
    raise ValueError(f"somelib cannot read {len(batch)} items")
'''


@pytest.fixture(scope="module")
def raising(tmp_path_factory):
    """{batch given: the job's stderr lines}, from a real run of each."""
    root = tmp_path_factory.mktemp("raising")
    site, _ = _installed(root, RAISES)
    out = {}
    for batch in ("{}", "{'a': 1}"):
        train = root / "train.py"
        train.write_text(TRAIN.replace("core.step({})", "core.step(%s)" % batch))
        proc = subprocess.run([sys.executable, str(train), str(site)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 1
        out[batch] = proc.stderr.splitlines()
    return out


def _said(result):
    return [(f.signature.id, f.exception.type, f.exception.message, f.exception.library)
            for f in result.findings]


def test_a_cut_whose_last_statement_raises_a_literal_message_reads_as_its_error_line(
        raising, tmp_path, matrix):
    """Cut before its error line, the traceback's last source line is the statement that
    raised: explain's answer is the one it gives the whole traceback (issue #34, phase AC:
    unslothai/unsloth#1933's log ends at Unsloth's raise)."""
    lines = raising["{}"]
    assert lines[-1] == "RuntimeError: somelib does not support an empty batch - see its docs"
    whole, _ = _explain("\n".join(lines) + "\n", tmp_path, matrix)
    cut, log = _explain("\n".join("[rank3]: " + ln for ln in lines[:-1]) + "\n", tmp_path,
                        matrix)
    assert _said(cut) == _said(whole) == [
        ("program.exception", "RuntimeError",
         "somelib does not support an empty batch - see its docs", "somelib")]
    assert cut.findings[0].ranks == {3}
    assert cut.findings[0].line.number == len(lines) - 1  # the statement's line
    assert cut.structure[0].endswith("(in step), called from the job's own code at %s:%d "
                                     "(in main), raises RuntimeError there, read as that "
                                     "line" % (lines[1].split('"')[1], 8))
    assert "cut before its error line; its last frame" in cut.structure[0]


def test_a_cut_whose_last_statement_builds_its_message_stays_without_an_error(
        raising, tmp_path, matrix):
    """An f-string's words are not the statement's: the cut says where the job was, and
    names no error."""
    lines = raising["{'a': 1}"]
    assert lines[-1] == "ValueError: somelib cannot read 1 items"
    assert lines[-2].strip().startswith('raise ValueError(f"somelib')
    result, _ = _explain("\n".join(lines[:-1]) + "\n", tmp_path, matrix)
    assert result.findings == [] and len(result.cut) == 1 and result.cut[0].raised is None
