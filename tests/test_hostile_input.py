"""What envcheck reads and prints in a hostile environment (issue 28): strings other
programs wrote (host names in answer files, GPU names and errors from nvidia-smi, a
--python wrapper's output) are data, never terminal control; inputs that are not files
never hang it; a latin-1 terminal, a closed pipe, random bytes and random JSON shapes
end in one line and a meaningful exit code, never a traceback."""

import copy
import io
import json
import os
import random
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

from conftest import ROOT, run_cli

# A window title (OSC ... BEL), clear screen (CSI 2J), an 8-bit CSI, a bell, a NUL.
EVIL = "evil\x1b]0;pwned\x07\x1b[2J\x9b2Jx"
RAW = ("\x1b", "\x9b", "\x07", "\x00")


def _no_raw_control(text):
    return not [c for c in RAW if c in text]


def _answer(tmp_path, host, driver):
    """One node's check answer; a 470 driver cannot run cu124 (exit 1), 535 can (0)."""
    path = tmp_path / ("%d.json" % len(list(tmp_path.glob("*.json"))))
    res = run_cli("check", "torch==2.6.0", "--gpu", "sm_90", "--python-version", "3.11",
                  "--glibc", "2.35", "--driver", driver, "--json", str(path),
                  env={"ENVCHECK_HOST": host})
    assert res.code == {"470.82.01": 1, "535.104.05": 0}[driver], res.stderr
    return path


def test_escapes_in_host_names_are_shown_escaped_by_summary(tmp_path):
    answers = tmp_path / "answers"
    answers.mkdir()
    _answer(answers, EVIL, "470.82.01")  # fails: its host is listed
    _answer(answers, "good", "535.104.05")
    res = run_cli("summary", str(answers))
    assert res.code == 1, res.stderr
    assert _no_raw_control(res.stdout), repr(res.stdout)
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\x9b2Jx" in res.stdout
    # JSON keeps the raw value, escaped as JSON (C1 too: \u009b)
    res = run_cli("summary", str(answers), "--format", "json")
    assert _no_raw_control(res.stdout), repr(res.stdout)
    data = json.loads(res.stdout)
    assert EVIL in [h for g in data["groups"] for h in g["hosts"]]


def _fake_smi(tmp_path, script):
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    return {"PATH": "%s%s%s" % (fake.parent, os.pathsep, os.environ["PATH"])}


def test_a_gpu_name_from_nvidia_smi_cannot_drive_the_terminal(tmp_path):
    env = _fake_smi(tmp_path, "printf '0, NVIDIA A100\\033]0;pwned\\007\\033[2J\\302\\2332J, "
                              "8.0, 535.104.05, 81920\\n'\n")
    res = run_cli("check", "torch==2.6.0", env=env)
    assert res.code == 0, res.stderr  # an A100 (sm_80) on R535 runs 2.6.0's cu124
    assert "NVIDIA A100" in res.stdout
    assert _no_raw_control(res.stdout), repr(res.stdout)
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x9b2J" in res.stdout


def test_an_error_from_nvidia_smi_cannot_drive_the_terminal(tmp_path):
    env = _fake_smi(tmp_path, "printf 'NVML: \\033[2J\\033]0;pwned\\007 driver gone\\n'; exit 9\n")
    res = run_cli("check", "torch==2.6.0", env=env)
    assert res.code == 2, res.stderr
    assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr
    assert _no_raw_control(res.stderr), repr(res.stderr)
    assert "\\x1b[2J\\x1b]0;pwned\\x07 driver gone" in res.stderr


@pytest.mark.parametrize("command", ["check", "summary"])
def test_a_latin1_terminal_gets_ascii_glyphs_not_a_traceback(tmp_path, command):
    """PYTHONIOENCODING=latin-1 (a node's legacy locale): ✓ and ✗ cannot be encoded.
    (Before: UnicodeEncodeError.)"""
    if command == "check":
        args = ["check", "torch==2.6.0", "--driver", "535.104.05", "--gpu", "sm_90"]
    else:
        answers = tmp_path / "answers"
        answers.mkdir()
        _answer(answers, "node1", "535.104.05")
        args = ["summary", str(answers)]
    res = run_cli(*args, env={"PYTHONIOENCODING": "latin-1"})
    assert res.code == 0, res.stderr
    assert "Traceback" not in res.stderr and res.stderr == ""
    assert "+ " in res.stdout and "✓" not in res.stdout


@pytest.mark.parametrize("driver,code", [("535.104.05", 0), ("470.82.01", 1)])
def test_a_closed_stdout_pipe_keeps_the_answers_exit_code(driver, code):
    """The reader of stdout went away (``| head -0``): the exit code is still the
    answer, 0 for will work, 1 for will not. (Before: 1 either way.)"""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "envcheck", "check", "torch==2.6.0",
                               "--driver", driver, "--gpu", "sm_90"], cwd=ROOT,
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


def test_a_fifo_among_the_answers_is_skipped_with_a_note(tmp_path):
    """A FIFO named like an answer (nobody ever writes to it): summary, report and
    check -r answer at once. (Before: each hung, reading it forever.)"""
    answers = tmp_path / "answers"
    answers.mkdir()
    _answer(answers, "node1", "535.104.05")
    os.mkfifo(answers / "zz.json")
    res = run_cli("summary", str(answers), timeout=60)
    assert res.code == 3, res.stderr  # nothing fails, an input could not be used
    assert "zz.json: a FIFO, not a file: skipped" in " ".join(res.stdout.split())
    assert "1 of 1 node will work" in res.stdout
    res = run_cli("report", str(answers / "zz.json"), timeout=60)
    assert (res.code, res.stderr.count("\n")) == (2, 1), res.stderr
    assert "a FIFO, not a file" in res.stderr
    os.mkfifo(tmp_path / "req.txt")
    res = run_cli("check", "-r", str(tmp_path / "req.txt"), timeout=60)
    assert (res.code, res.stderr.count("\n")) == (2, 1), res.stderr
    assert "a FIFO, not a file" in res.stderr
    # and the other files envcheck reads: a matrix directory's *.toml, a probe file
    (tmp_path / "matrix").mkdir()
    os.mkfifo(tmp_path / "matrix" / "x.toml")
    res = run_cli("matrix", "--validate", "--matrix", str(tmp_path / "matrix"), timeout=60)
    assert res.code == 2 and "x.toml: cannot read it: a FIFO, not a file" in res.stderr
    os.mkfifo(tmp_path / "probe.py")
    res = run_cli("probes", "--probe-path", str(tmp_path / "probe.py"), timeout=60)
    assert res.code == 2 and "not a regular file" in res.stderr


@pytest.mark.parametrize("field,value", [
    ("created", 5), ("driver", {"x": 1}), ("python", [3, 11]),
])
def test_mistyped_fields_in_an_answer_are_a_problem_line(tmp_path, field, value):
    """(Before: TypeError tracebacks from sorting and counting.)"""
    answers = tmp_path / "answers"
    answers.mkdir()
    _answer(answers, "node1", "535.104.05")
    bad = _answer(answers, "node2", "535.104.05")
    data = json.loads(bad.read_text())
    target = data["node"] if field in ("driver", "python", "gpus") else data
    target[field] = value
    bad.write_text(json.dumps(data))
    res = run_cli("summary", str(answers))
    assert "Traceback" not in res.stderr, res.stderr
    assert res.code == 3, res.stdout + res.stderr
    shown = " ".join(res.stdout.split())
    assert "Could not use: %s: a" % bad in shown and "1 of 1 node will work" in shown


@pytest.mark.ranks
def test_a_python_wrapper_that_prints_is_understood(tmp_path):
    """A --python wrapper that prints a line after the interpreter's answer. (Before:
    TypeError: 'int' object is not subscriptable.)"""
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\necho "module loaded"\n%s "$@"\necho 42\n' % sys.executable)
    wrapper.chmod(0o755)
    res = run_cli("run", "--python", str(wrapper), "-p", "launch", "-q", timeout=300)
    assert res.code == 0, res.stdout + res.stderr


@pytest.mark.ranks
@pytest.mark.parametrize("value", ["0.001", "0.5", "nan", "-1"])
def test_a_timeout_below_the_floor_is_refused(value):
    """(Before: --timeout 0.001 was accepted and not enforced.)"""
    res = run_cli("run", "--timeout", value, "-p", "launch")
    assert res.code == 2, res.stdout + res.stderr
    assert len(res.stderr.splitlines()) == 1
    assert "must be at least 1 s" in res.stderr


# --- fuzz: random bytes and random JSON shapes, in process (fast), every one an exit
# code of the documented set and never an exception out of the CLI.

def _cli(*argv):
    from envcheck import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            cli.entry(list(argv), head=None)
        except SystemExit as exc:
            return exc.code, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


KEYS = ["host", "checks", "node", "answer", "exit_code", "kind", "id", "outcome", "ranks",
        "gpus", "name", "criteria", "status", "schema_version", "environment", "created"]


def _shapes(rng, depth=0):
    """A random JSON value: scalars of every type, escapes, and nested lists and objects
    (sometimes very deep)."""
    pick = rng.randrange(10 if depth < 4 else 7)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, 1, 2, 3, -1, 2 ** 63, rng.randint(-2 ** 40, 2 ** 40)])
    if pick == 3:
        return rng.choice([0.5, 1e308, -0.0, rng.random() * 1e6])
    if pick == 4:
        return (EVIL + "\x00")[:rng.randrange(len(EVIL) + 2)]
    if pick == 5:
        return rng.choice(["", "works", "fails", "passed", "crash", "3.11", "535.104.05"])
    if pick == 6:
        return rng.choice([[], {}, [[[[[[]]]]]]])
    if pick in (7, 8):
        return [_shapes(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {k: _shapes(rng, depth + 1) for k in rng.sample(KEYS, rng.randrange(4))}


def _mutate(rng, value, depth=0):
    """A copy of ``value`` with some subtrees replaced by random shapes."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        value = dict(value)
        for key in rng.sample(sorted(value), min(len(value), rng.randrange(1, 4))):
            value[key] = _mutate(rng, value[key], depth + 1) if rng.random() < 0.6 \
                else _shapes(rng)
        return value
    if isinstance(value, list) and value and rng.random() < 0.8:
        value = list(value)
        i = rng.randrange(len(value))
        value[i] = _mutate(rng, value[i], depth + 1)
        return value
    return _shapes(rng)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """A real check answer and a real (small) run report to mutate."""
    d = tmp_path_factory.mktemp("seeds")
    run_cli("check", "torch==2.6.0", "--driver", "535.104.05", "--gpu", "sm_90", "--json",
            str(d / "check.json"), env={"ENVCHECK_HOST": "node1"})
    res = run_cli("run", "-p", "launch", "-q", "--json", str(d / "run.json"), timeout=300)
    assert res.code == 0, res.stderr
    return (json.loads((d / "check.json").read_text()),
            json.loads((d / "run.json").read_text()))


@pytest.mark.ranks
def test_fuzz_report_and_summary_never_raise(tmp_path, seeds):
    rng = random.Random(28)
    check, report = seeds
    for i in range(150):
        path = tmp_path / ("case%d.json" % i)
        kind = i % 3
        if kind == 0:
            path.write_bytes(rng.choice([
                os.urandom(rng.randrange(200)), json.dumps(_shapes(rng)).encode(),
                b'{"checks": ' + b"[" * 100000 + b"]" * 100000 + b"}"]))
        else:
            path.write_text(json.dumps(_mutate(rng, copy.deepcopy(check if kind == 1
                                                                   else report))))
        for argv in (["report", str(path)], ["summary", str(path)],
                     ["summary", str(path), "--format", "json"]):
            code, out, err = _cli(*argv)
            assert code in (0, 1, 2, 3), (argv, code, err, path.read_text()[:500])
            assert "Traceback" not in err and _no_raw_control(out + err), (argv, err)


def test_fuzz_the_requirements_reader_never_raises(tmp_path):
    rng = random.Random(2028)
    words = ["torch", "==", "2.4.1", "+cu124", ">=", "-r", "--index-url", "-i", "#", "\\",
             "https://download.pytorch.org/whl/cu121", ";", "python_version", "<", "'3.13'",
             "--hash=sha256:00", " ", "\n", "\x1b[2J", "\x9b", "\x00", "é", "torch[x]", "@"]
    for i in range(60):
        path = tmp_path / ("req%d.txt" % i)
        if i % 3 == 0:
            path.write_bytes(os.urandom(rng.randrange(300)))
        else:
            path.write_text("".join(rng.choice(words) for _ in range(rng.randrange(1, 30))),
                            encoding="utf-8")
        code, out, err = _cli("check", "-r", str(path), "--driver", "535.104.05")
        assert code in (0, 1, 2, 3), (code, err, path.read_bytes()[:300])
        assert "Traceback" not in err and _no_raw_control(out + err), err
