"""The structure of a log read before its text (issue #34): a real 4-rank torchrun job
made here, where rank 2 raises in its own code and the ranks waiting for it in an
all_reduce die of gloo's "Connection closed by peer", comes out as rank 2's own error
first (its file and line), and the other ranks' errors and torchrun's summary as
consequences. Plus input that is not a log, and the screen's width."""

import json
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
                               "--nproc_per_node", "4", "--tee", "3", "--log-dir",
                               str(tmp_path / "logs"), SCRIPT],
                              stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=280)
    assert proc.returncode != 0
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "Connection closed by peer" in text and "Root Cause" in text
    _check_user_error(command.explain([str(log)]), SCRIPT)
    # the same job's --log-dir, as the advice asks to keep it: a stdout.log and a
    # stderr.log a rank, most of them empty (a rank that printed nothing), given with
    # the console's log or alone
    logs = sorted(str(p) for p in (tmp_path / "logs").rglob("*.log"))
    assert len(logs) == 8 and any(os.path.getsize(p) == 0 for p in logs), logs
    _check_user_error(command.explain(logs + [str(log)]), SCRIPT)
    alone = command.explain(logs)
    first = alone.findings[0]
    assert (first.signature.id, first.ranks, first.exception.culprit) == (
        "program.exception", {2}, (SCRIPT, _bug_line(), "load_labels"))
    # eight logs are counted in the first line, under the directory they share
    empty = sum(os.path.getsize(p) == 0 for p in logs)
    lines = sum(len(open(p, "rb").read().splitlines()) for p in logs)
    assert render.render(alone).splitlines()[0] == (
        "envcheck explain: 1 cause found in 8 logs under %s (%d empty, %d lines)"
        % (os.path.commonpath(logs), empty, lines))


@pytest.mark.ranks
def test_the_error_files_of_a_recorded_job_give_the_first_rank_and_its_own_error(tmp_path):
    """The same job under torch elastic's @record: the ranks that raised wrote their
    tracebacks to error files (JSON, one object), which --log-dir keeps in each local
    rank's directory. Read alone they say rank 2's own error first, the others' closed
    connection after it; with the console's log, torchrun's Root Cause too."""
    recorded = os.path.join(ROOT, "tests", "data", "explain", "torchrun_user_error_recorded.py")
    log = tmp_path / "job.log"
    with open(log, "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                               "--nproc_per_node", "4", "--log-dir", str(tmp_path / "logs"),
                               recorded], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
                              timeout=280)
    assert proc.returncode != 0
    files = sorted(str(p) for p in (tmp_path / "logs").rglob("error.json"))
    assert [os.path.basename(os.path.dirname(p)) for p in files] == ["1", "2", "3"], files
    result = command.explain(files)
    first = result.findings[0]
    assert (first.signature.id, first.ranks, first.exception.culprit) == (
        "program.exception", {2}, (SCRIPT, _bug_line(), "load_labels"))
    assert [(f.signature.id, f.ranks) for f in result.consequences] == [
        ("torch.peer_closed", {1, 3})]
    _check_user_error(command.explain(files + [str(log)]), SCRIPT)


def test_the_kept_run_of_it_explains_the_same():
    # the same job's log, kept (run from this worktree: the script's path is as it ran)
    with open(KEPT, encoding="utf-8") as f:
        ran = next(line for line in f if "torchrun_user_error.py\", line" in line)
    script = ran.split('File "')[1].split('"')[0]
    _check_user_error(command.explain([KEPT]), script)


# The same job's log as a log collector prints it: in two pods, as `kubectl logs -l
# job-name=... --prefix` does (ranks 0-1 in trainer-worker-0, ranks 2-3 and their agent
# in trainer-worker-1), run as a service on two hosts, as journalctl prints it, or read
# from a container's file as the container runtime wrote it
COLLECTED = {
    "kubectl": lambda host, text: "[pod/trainer-worker-%d/pytorch] %s" % (host, text),
    "journalctl": lambda host, text: "Nov 27 04:00:01 node%d python3[%d]: %s" % (
        host, 4242 + host, text),
    # the CRI log format: a container's file under /var/log/pods (no host in it)
    "cri": lambda host, text: "2026-11-27T04:00:01.%06d+00:00 stderr F %s" % (host, text),
}
HOST = {"kubectl": {"trainer-worker-1"}, "journalctl": {"node1"}, "cri": set()}


@pytest.mark.parametrize("collector", sorted(COLLECTED))
def test_the_kept_run_as_a_log_collector_prints_it_explains_the_same(collector, tmp_path):
    with open(KEPT, encoding="utf-8") as f:
        ran = f.read()
    script = next(ln for ln in ran.splitlines()
                  if "torchrun_user_error.py\", line" in ln).split('File "')[1].split('"')[0]
    lines = []
    for text in ran.splitlines(True):
        host = 0 if text.startswith(("[default0]", "[default1]")) else 1
        lines.append(COLLECTED[collector](host, text))
    log = tmp_path / "collected.log"
    log.write_text("".join(lines), encoding="utf-8")
    result = command.explain([str(log)])
    _check_user_error(result, script)
    assert result.findings[0].hosts == HOST[collector]


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


def test_an_empty_log_among_others_is_said_and_all_of_them_empty_is_exit_2(tmp_path):
    empty, other = tmp_path / "stdout.log", tmp_path / "stderr.log"
    empty.write_bytes(b"")
    other.write_bytes(b"[rank0]: RuntimeError: DataLoader worker (pid 77) is killed by "
                      b"signal: Bus error.\n")
    res = run_cli("explain", "--no-color", str(empty), str(other))
    assert res.code == 0, (res.stdout, res.stderr)
    assert res.stdout.splitlines()[0] == "envcheck explain: 1 cause found in %s (empty), %s " \
        "(1 line)" % (empty, other)
    res = run_cli("explain", str(empty), str(empty))
    assert res.code == 2 and res.stderr == ("envcheck: error: %s, %s: every log given is "
                                            "empty: there is no log in them\n" % (empty, empty))


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
                                   "function": "load_labels", "own_code": True,
                                   "library": None}
    assert by_rank[2]["called_from"] is None
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


# Logs mangled as two ranks print them (phase F of issue #34). CPython's PyErr_Display
# writes an exception's type, ": ", its message and the newline as writes of their own
# (Python/pythonrun.c), and each source line of a traceback as its indentation, its text
# and the newline (Python/traceback.c): two ranks that fail at the same moment mix those
# writes within a line. A pasted log can hold a traceback in reverse.

def _explained(text, tmp_path):
    log = tmp_path / "job.log"
    log.write_text(text, encoding="utf-8")
    return command.explain([str(log)])


def test_two_ranks_identical_tracebacks_interleaved_line_by_line_are_one_error(tmp_path):
    result = _explained('Traceback (most recent call last):\n'
                        'Traceback (most recent call last):\n'
                        '  File "/home/u/train.py", line 30, in <module>\n'
                        '  File "/home/u/train.py", line 30, in <module>\n'
                        '    main(cfg)\n'
                        '    main(cfg)\n'
                        '  File "/home/u/train.py", line 12, in main\n'
                        '  File "/home/u/train.py", line 12, in main\n'
                        '    steps = cfg["steps"]\n'
                        '    steps = cfg["steps"]\n'
                        "KeyError: 'steps'\n"
                        "KeyError: 'steps'\n", tmp_path)
    assert [f.signature.id for f in result.findings] == ["program.exception"]
    assert result.consequences == []
    exc = result.findings[0].exception
    assert (exc.type, exc.message, exc.count) == ("KeyError", "'steps'", 2)
    assert exc.frames == [("/home/u/train.py", 30, "<module>"), ("/home/u/train.py", 12, "main")]


def test_the_type_and_message_written_twice_within_a_line_are_read_once(tmp_path):
    # huggingface/accelerate#1263's shape: 'ValueErrorValueError: : MM'
    result = _explained('Traceback (most recent call last):\n'
                        '  File "test.py", line 6, in <module>\n'
                        '        a, b = f()a, b = f()\n'
                        "IndexErrorIndexError: : list index out of rangelist index out of range\n",
                        tmp_path)
    exc = result.findings[0].exception
    assert (exc.type, exc.message) == ("IndexError", "list index out of range")
    assert exc.culprit == ("test.py", 6, "<module>")


def test_another_ranks_source_line_glued_to_the_message_is_taken_off(tmp_path):
    # lucidrains/magvit2-pytorch#22's shape: the other rank's indentation before the
    # colon, its source line (shown above) before the message
    result = _explained('Traceback (most recent call last):\n'
                        '  File "/w/trainer.py", line 203, in __init__\n'
                        '    self.scale = self.model.scale\n'
                        '  File "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py",'
                        ' line 1614, in __getattr__\n'
                        '    raise AttributeError("\'{}\' object has no attribute \'{}\'".format(\n'
                        "AttributeError    : self.scale = self.model.scale'DistributedDataParallel'"
                        " object has no attribute 'scale'\n", tmp_path)
    exc = result.findings[0].exception
    assert exc.type == "AttributeError"
    assert exc.message == "'DistributedDataParallel' object has no attribute 'scale'"
    assert exc.culprit == ("/w/trainer.py", 203, "__init__")


def test_a_message_that_begins_like_an_earlier_log_line_is_kept_whole(tmp_path):
    # only a source line as CPython indents it (four blanks) counts as glued
    result = _explained("Loading the dataset shards\n"
                        "ValueError: Loading the dataset shards failed: 3 of 8 missing\n",
                        tmp_path)
    exc = result.findings[0].exception
    assert exc.message == "Loading the dataset shards failed: 3 of 8 missing"


def test_a_traceback_pasted_in_reverse_has_its_frames_below(tmp_path):
    result = _explained("ValueError: bad config value: lr\n"
                        '  File "/home/u/train.py", line 12, in load\n'
                        '    raise ValueError("bad config value: lr")\n'
                        '  File "/home/u/train.py", line 40, in <module>\n'
                        '    load(cfg)\n'
                        "Traceback (most recent call last):\n", tmp_path)
    first = result.findings[0]
    assert first.signature.id == "program.exception"
    assert first.exception.frames == [("/home/u/train.py", 40, "<module>"),
                                      ("/home/u/train.py", 12, "load")]
    assert "/home/u/train.py:12 (in load)" in first.cause


def test_the_next_exceptions_traceback_is_not_taken_for_frames_below(tmp_path):
    # a chain as CPython prints it: the frames below the separator are the next one's
    result = _explained("ValueError: bad config value: lr\n\n"
                        "During handling of the above exception, another exception occurred:\n\n"
                        "Traceback (most recent call last):\n"
                        '  File "/home/u/train.py", line 50, in <module>\n'
                        '    run()\n'
                        "SystemError: gave up\n", tmp_path)
    first = result.findings[0]
    assert first.exception.type == "ValueError" and first.exception.frames == []


@pytest.mark.parametrize("text,kind", [
    # torch ProcessGroupNCCL.cpp check_gpu_single_tensor: a CPU tensor given to NCCL
    ("RuntimeError: Tensors must be CUDA and dense\n", "RuntimeError"),
    ("ValueError: Tensors must be CUDA and dense\n", "ValueError"),
    # ATen's TORCH_CHECK (TensorIterator and many ops): the program's two devices
    ("RuntimeError: Expected all tensors to be on the same device, but found at least two "
     "devices, cuda:0 and cpu!\n", "RuntimeError"),
    # Lightning-AI/pytorch-lightning#5641's line: another rank's source line glued in
    ('RuntimeError: self.log("acc", acc, sync_dist=True)Tensors must be CUDA and dense\n',
     "RuntimeError"),
], ids=["nccl-cpu-tensor", "nccl-cpu-tensor-2.x", "two-devices", "glued"])
def test_torchs_checks_of_what_the_program_passed_are_the_programs_error(text, kind, tmp_path):
    """Their words name CUDA, but they judge the tensors the program passed."""
    result = _explained(text, tmp_path)
    assert [f.signature.id for f in result.findings] == ["program.exception"]
    assert result.findings[0].exception.type == kind


# A C++ error of torch (c10::Error) with its place in torch's source and its C++ backtrace
# (issue #34, phase H: penincillin/DCT_ICCV-2019#3): the program's error, with its type,
# and torch's refusal of a DDP module without trainable parameters said in words
DDP_NO_PARAMETERS = [
    # torch <= 1.4: AT_ASSERTM, the place on the message's line, then 'frame #N'
    ("RuntimeError: replicas_[0].size() >= 1 ASSERT FAILED at /pytorch/torch/csrc/distributed/"
     "c10d/reducer.cpp:53, please report a bug to PyTorch. Expected at least one parameter. "
     "(Reducer at /pytorch/torch/csrc/distributed/c10d/reducer.cpp:53)\n"
     "frame #0: std::function<std::string ()>::operator()() const + 0x11 (0x7f1e388cc441 in "
     "/usr/lib/python3.6/site-packages/torch/lib/libc10.so)\n"),
    # torch 1.7 on: 'Exception raised from FUNC at FILE:LINE (most recent call first):'
    ("RuntimeError: Expected at least one parameter.\n"
     "Exception raised from Reducer at ../torch/csrc/distributed/c10d/reducer.cpp:92 (most "
     "recent call first):\n"
     "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x42 (0x7f3c in "
     "/usr/lib/python3.8/site-packages/torch/lib/libc10.so)\n"),
    # DDP's own check in Python (torch/nn/parallel/distributed.py)
    ("RuntimeError: DistributedDataParallel is not needed when a module doesn't have any "
     "parameter that requires a gradient.\n"),
]


@pytest.mark.parametrize("error", DDP_NO_PARAMETERS, ids=["assert-1.4", "check-1.7", "python"])
def test_a_cpp_error_with_its_backtrace_is_the_programs_error_in_words(error, tmp_path):
    result = _explained('Traceback (most recent call last):\n'
                        '  File "src/train_dist.py", line 74, in main\n'
                        '    model = DCTModel(opt)\n'
                        '  File "/home/u/DCT/src/models/dct_model.py", line 121, in __init__\n'
                        '    self.smpl, device_ids=[torch.cuda.current_device()])\n'
                        '  File "/usr/lib/python3.6/site-packages/torch/nn/parallel/'
                        'distributed.py", line 338, in _ddp_init_helper\n'
                        '    self.process_group)\n' + error, tmp_path)
    first = result.findings[0]
    assert first.signature.id == "program.exception"
    assert first.exception.type == "RuntimeError"
    assert first.exception.culprit == ("/home/u/DCT/src/models/dct_model.py", 121, "__init__")
    assert "no parameter that requires a gradient" in first.signature.cause
    assert first.signature.advice.startswith("wrap only the modules that train")
    assert "reducer.cpp" in first.signature.source


def test_another_programs_words_get_no_ddp_meaning(tmp_path):
    result = _explained("ValueError: Expected at least one parameter vector, got none\n",
                        tmp_path)
    first = result.findings[0]
    assert first.signature.id == "program.exception"
    assert "DistributedDataParallel" not in first.signature.cause


# Whose code raised (issue #34, phase O): the deepest frame that is neither torch nor the
# standard library, and the library it is code of, by its import name: an installed
# package, or a checkout of a training stack; where the job's own code called it.
SITE = "/opt/conda/lib/python3.10/site-packages/"
OWN = ("/home/u/proj/train.py", 88, "main", "engine.step()")


def _tb(*frames):
    return "Traceback (most recent call last):\n" + "".join(
        '  File "%s", line %d, in %s\n    %s\n' % f for f in frames)


@pytest.mark.parametrize("frames, library, culprit, caller", [
    # an installed library raised, called from the job's own code
    ((OWN, (SITE + "deepspeed/runtime/engine.py", 2100, "step", "self._take_step()"),
      (SITE + "deepspeed/runtime/zero/stage_1_and_2.py", 985, "hook", "b[dt]")),
     "deepspeed", (SITE + "deepspeed/runtime/zero/stage_1_and_2.py", 985, "hook"),
     OWN[:3]),
    # a checkout of a training stack (an editable install): the same library
    ((OWN, ("/code/u/DeepSpeed/deepspeed/runtime/base_optimizer.py", 70, "report", "b[dt]")),
     "deepspeed", ("/code/u/DeepSpeed/deepspeed/runtime/base_optimizer.py", 70, "report"),
     OWN[:3]),
    # torch refused what a library passed it: the library's frame is blamed
    ((OWN, (SITE + "deepspeed/runtime/pipe/engine.py", 375, "reduce", "dist.all_reduce(g)"),
      (SITE + "torch/distributed/distributed_c10d.py", 2500, "all_reduce", "_check(t)")),
     "deepspeed", (SITE + "deepspeed/runtime/pipe/engine.py", 375, "reduce"), OWN[:3]),
    # NumPy and tqdm run what their caller hands them: the caller is blamed
    ((OWN, (SITE + "deepspeed/data/analyzer.py", 40, "merge", "np.memmap(f)"),
      (SITE + "numpy/core/memmap.py", 267, "__new__", "mm = mmap.mmap(...)")),
     "deepspeed", (SITE + "deepspeed/data/analyzer.py", 40, "merge"), OWN[:3]),
    ((OWN, (SITE + "tqdm/std.py", 1181, "__iter__", "for obj in iterable:"),
      (SITE + "torch/utils/data/dataloader.py", 630, "__next__", "data = self._next()")),
     None, OWN[:3], None),
    # the job's own code raised, under a library's loop: no library
    (((SITE + "lightning/pytorch/trainer/trainer.py", 544, "fit", "self._run()"),
      ("/home/u/proj/model.py", 40, "training_step", "x = batch['y']")),
     None, ("/home/u/proj/model.py", 40, "training_step"), None),
    # torch in a source tree is torch; a job's module named torch/distributed.py is not
    ((OWN, ("/data/u/pytorch/torch/nn/modules/module.py", 1614, "__getattr__", "raise")),
     None, OWN[:3], None),
    (((OWN, ("/home/u/returnn/returnn/torch/distributed.py", 30, "init", "raise"))),
     None, ("/home/u/returnn/returnn/torch/distributed.py", 30, "init"), None),
    # Ray's temporary directory and a home named after a stack are not the stack's code
    ((("/tmp/ray/session_2026_01/runtime_resources/working_dir_files/pkg/train.py", 9,
       "run", "x()"),), None,
     ("/tmp/ray/session_2026_01/runtime_resources/working_dir_files/pkg/train.py", 9, "run"),
     None),
    ((("/home/ray/default/train.py", 9, "run", "x()"),), None,
     ("/home/ray/default/train.py", 9, "run"), None),
    # verl run from Ray's working_dir: verl's code
    ((("/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_1/verl/workers/"
       "fsdp_workers.py", 798, "init_model", "x()"),), "verl",
     ("/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_1/verl/workers/"
      "fsdp_workers.py", 798, "init_model"), None),
], ids=["installed", "checkout", "torch-refused", "numpy", "tqdm", "own-in-loop",
        "torch-tree", "own-torch-module", "ray-tmp", "home-ray", "ray-working-dir"])
def test_the_code_to_blame_and_its_library(frames, library, culprit, caller, tmp_path):
    exc = _explained(_tb(*frames) + "KeyError: 'x'\n", tmp_path).findings[0].exception
    assert (exc.library, exc.culprit, exc.caller) == (library, culprit, caller)


def test_a_library_s_error_says_whose_code_raised_and_where_the_job_called_it(tmp_path):
    frames = (OWN, (SITE + "deepspeed/runtime/engine.py", 2100, "step", "self._take()"),
              (SITE + "deepspeed/runtime/base_optimizer.py", 70, "report", "b[dt]"))
    result = _explained(_tb(*frames) + "KeyError: torch.bfloat16\n", tmp_path)
    first = result.findings[0]
    assert first.signature.id == "program.exception"
    assert first.cause == (
        "the program raised KeyError: torch.bfloat16 in deepspeed's code at " + SITE
        + "deepspeed/runtime/base_optimizer.py:70 (in report), called from the job's own "
        "code at /home/u/proj/train.py:88 (in main): an error in a library the job runs, "
        "not in the environment")
    assert first.signature.advice.startswith(
        "deepspeed raised it, not the environment: check the job's call at "
        "/home/u/proj/train.py:88 against deepspeed's documentation")
    own = _explained(_tb(OWN) + "KeyError: 'x'\n", tmp_path).findings[0]
    assert own.cause.endswith("an error in the job's own code, not in the environment")
    assert own.signature.advice.startswith("fix the program at that line")


def test_three_ranks_writing_one_type_at_once_are_read_as_one_type(tmp_path):
    # mlfoundations/open_lm#234's shape: three ranks' types, then their separators
    result = _explained("AttributeErrorAttributeErrorAttributeError: : : 'DistributedDataPara"
                        "llel' object has no attribute 'set_grad_checkpointing'\n", tmp_path)
    exc = result.findings[0].exception
    assert (exc.type, exc.message) == (
        "AttributeError", "'DistributedDataParallel' object has no attribute "
        "'set_grad_checkpointing'")


# VS Code's debugger's exception popup, copied whole (NVIDIA/NeMo-Aligner#153, batch 33):
# the type on the first line with the debugger's note, the message below it, then the
# frames innermost first. Read as the program's error raised in NeMo's code; the same
# words without frames below are no exception.
VSCODE_POPUP = """\
Exception has occurred: RuntimeError       (note: full exception trace is shown but execution is paused at: _run_module_as_main)
shape '[1]' is invalid for input of size 2
  File "/opt/NeMo/nemo/collections/nlp/modules/common/megatron/utils.py", line 183, in <listcomp>
    averaged_losses = torch.cat([loss.clone().detach().view(1) for loss in losses])
  File "/home/u/src/nemo-rlhf/nemo_aligner/models/nlp/gpt/megatron_gpt_dpo_model.py", line 164, in loss_func
    reduced_loss = average_losses_across_data_parallel_group([loss])
"""


def test_vs_code_s_exception_popup_is_the_program_s_error(tmp_path):
    log = tmp_path / "vscode.log"
    log.write_text(VSCODE_POPUP)
    result = run_cli("explain", str(log), "--format", "json")
    finding = json.loads(result.stdout)["findings"][0]
    assert (finding["id"], finding["exception"]["type"],
            finding["exception"]["message"]) == (
        "program.exception", "RuntimeError", "shape '[1]' is invalid for input of size 2")
    assert finding["exception"]["frame"]["library"] == "nemo", finding["exception"]
    alone = tmp_path / "alone.log"
    alone.write_text(VSCODE_POPUP.splitlines()[0] + "\nshape mismatch\nstep 3 done\n")
    assert json.loads(run_cli("explain", str(alone), "--format", "json").stdout)[
        "findings"] == []
