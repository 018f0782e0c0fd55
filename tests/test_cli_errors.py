"""Bad input: one line on stderr, exit 2, no traceback, and no file left behind."""

import json
import os
import subprocess
import sys

import xml.etree.ElementTree as ET

import pytest

from conftest import ROOT, run_cli


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
    (["run", "--timeout", "inf"], ["--timeout inf", "at most 86400 (a day)"]),
    (["run", "--timeout", "1e12"], ["--timeout 1e+12", "at most 86400"]),
    (["run", "--nproc", "99999999999999999999"], ["at most 1024 ranks on one machine"]),
    (["check", "torch===foo"], ["arbitrary equality (===) names no release"]),
    (["check", "torch==" + "1" * 5000], ["a version of 5000 characters is not a torch"]),
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
@pytest.mark.ranks
def test_bad_flags(args, fragments):
    assert_usage_error(run_cli(*args), *fragments)


@pytest.mark.ranks
def test_python_without_torch(python_without_torch):
    result = run_cli("run", "--python", python_without_torch)
    # Pinned, from the index envcheck check picks for this node (no GPU here: the CPU
    # build, not gigabytes of CUDA).
    assert_usage_error(result, "torch is not installed for", python_without_torch,
                       "install the newest torch that works on this node with: %s -m pip "
                       "install torch==" % python_without_torch,
                       " --index-url https://download.pytorch.org/whl/cpu, then %s -m pip "
                       "install numpy" % python_without_torch)


@pytest.mark.ranks
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
    ("[" * 100000 + "]" * 100000, "nested too deeply to read"),
    (json.dumps({"schema_version": 1, "envcheck_version": "0", "created": "", "plan": 5,
                 "environment": {}, "ranks": [], "checks": [], "duration_s": 0}),
     "plan is int, not dict"),
    (json.dumps({"schema_version": 1, "envcheck_version": "0", "created": "", "plan": {},
                 "environment": {}, "ranks": [], "duration_s": 0,
                 "checks": [{"probe": 1, "check": "c", "outcome": "passed"}]}),
     "checks[0].probe is int, not str"),
], ids=["not-json", "a-list", "schema-99", "missing", "empty", "nested-100000", "plan-int",
        "probe-int"])  # the 200 KB one as an id went into PYTEST_CURRENT_TEST: E2BIG
def test_corrupt_reports(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert_usage_error(run_cli("report", str(path)), fragment)


def test_no_arguments_prints_help():
    result = run_cli()
    assert result.code == 0
    assert "Commands" in result.stdout and "run" in result.stdout


ODD_OUTPUT = '''
import os


def probe_odd(ctx):
    """a check whose text and data no strict JSON or UTF-8 encoder takes as they are"""
    with ctx.check("bytes") as c:
        c.detail = "path " + os.fsdecode(b"/tmp/caf\\xe9-\\xff")  # not UTF-8 on disk
        c.data = {"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf")}
'''


def _strict(text):
    def refuse(word):
        raise ValueError("not strict JSON: %s" % word)
    return json.loads(text, parse_constant=refuse)


@pytest.mark.ranks
def test_undecodable_text_and_nan_make_strict_utf8_json(write_probes, tmp_path):
    path = write_probes(ODD_OUTPUT)
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    res = run_cli("run", "--probe-path", path, "-p", "odd", "--json", str(report),
                  "--junit", str(junit), "-q", "-v")
    assert res.code == 0, res.stderr
    assert "Traceback" not in res.stderr
    data = _strict(report.read_bytes().decode("utf-8"))
    check = {c["id"]: c for c in data["checks"]}["odd.bytes"]
    assert check["detail"] == "path /tmp/caf\\udce9-\\udcff"  # the bytes, escaped
    assert check["ranks"]["0"]["data"] == {"nan": "NaN", "inf": "Infinity",
                                           "ninf": "-Infinity"}
    ET.parse(str(junit))  # well-formed XML
    assert "path /tmp/caf" in res.stdout


@pytest.mark.ranks
def test_a_report_that_cannot_be_written_is_one_line_and_the_table_still_shows(tmp_path):
    """A file size limit (a full disk behaves alike): exit 2, one line, no half file."""
    import resource
    import subprocess
    import sys

    saved = tmp_path / "saved.json"
    res = run_cli("run", "-p", "launch", "--json", str(saved), "-q")
    assert res.code == 0, res.stderr
    target = tmp_path / "out.json"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    proc = subprocess.run([sys.executable, "-m", "envcheck", "report", str(saved), "--json",
                           str(target)], capture_output=True, text=True, preexec_fn=limit,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == "envcheck: error: cannot write %s: File too large\n" % target
    assert "\nnothing unexpected: 10 passed, 3 skipped in " in proc.stdout  # the screen, all the same
    assert sorted(os.listdir(tmp_path)) == ["saved.json"]  # no half file, no temp file


@pytest.mark.ranks
@pytest.mark.parametrize("target", ["/dev/null", "fifo"])
def test_a_report_never_replaces_a_device_or_a_fifo(tmp_path, target):
    if target == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    res = run_cli("run", "-p", "launch", "--json", target)
    assert (res.code, res.stderr) == (2, "envcheck: error: cannot write %s: not a regular "
                                      "file (reports are written atomically, as a new file "
                                      "renamed over the path)\n" % target)
    assert not os.path.isfile(target)


LEAKY = '''
def probe_leaky(ctx):
    """an error that carries credentials, as a failed download would"""
    with ctx.check("download"):
        raise RuntimeError("GET https://alice:s3cr3t-pw@hub.example/x failed; "
                           "token=tok-12345678 hf_abcdefghijklmnopqrstuvwxyz0123")
'''
SECRETS = ("s3cr3t-pw", "tok-12345678", "hf_abcdefghijklmnopqrstuvwxyz0123", "jwt-value-1",
           "ib-pass-2", "akia-value")


@pytest.mark.ranks
def test_no_secret_reaches_any_output(write_probes, tmp_path):
    """By name (SLURM_JWT, NCCL_IB_PASSPHRASE) and by value (a URL's password, tokens in
    an exception): not in the JSON, the JUnit, the markdown or the screen."""
    path = write_probes(LEAKY)
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    env = {"SLURM_JWT": "jwt-value-1", "NCCL_IB_PASSPHRASE": "ib-pass-2",
           "SLURM_JOB_ACCOUNT_KEY": "akia-value", "SLURM_JOB_ID": "4242"}
    res = run_cli("run", "--probe-path", path, "-p", "leaky", "--json", str(report),
                  "--junit", str(junit), "-q", env=env)
    assert res.code == 1, res.stderr
    md = run_cli("report", str(report), "--format", "markdown")
    outputs = [report.read_text(), junit.read_text(), res.stdout, res.stderr, md.stdout]
    for secret in SECRETS:
        assert not any(secret in out for out in outputs), secret
    data = json.loads(outputs[0])
    collected = data["environment"]["env"]
    assert collected["NCCL_IB_PASSPHRASE"] == "<redacted>"
    assert "SLURM_JWT" not in collected and "SLURM_JOB_ACCOUNT_KEY" not in collected
    assert collected["SLURM_JOB_ID"] == "4242"  # what describes the job stays
    message = {c["id"]: c for c in data["checks"]}["leaky.download"]["error"]["message"]
    assert message == ("GET https://alice:<redacted>@hub.example/x failed; "
                       "token=<redacted> <redacted>")


def test_check_never_echoes_a_password_in_a_pin():
    res = run_cli("check", "torch @ https://alice:s3cr3t-pw@host/nothing")
    assert res.code == 2
    assert "s3cr3t-pw" not in res.stderr + res.stdout
    assert "https://alice:<redacted>@host/nothing" in res.stderr


def test_requirements_files_as_editors_and_pip_compile_write_them(tmp_path):
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbftorch==2.4.1+cu121\n")
    hashed = tmp_path / "hashed.txt"
    hashed.write_text("torch==2.4.1+cu121 \\\n    --hash=sha256:abc \\\n    --hash=sha256:def\n"
                      "numpy==1.26.4 --hash=sha256:0123\n")
    for path in (bom, hashed):
        res = run_cli("check", "-r", str(path), "--format", "json")
        assert (res.code, res.stderr) == (0, "")  # an answer (no GPU here: it works), not an error
        assert json.loads(res.stdout)["answer"]["build"] == "2.4.1+cu121"


def test_a_deleted_current_directory_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.Popen([sys.executable, "-c",
                             "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
                             "sys.argv = ['envcheck', 'check', 'torch==2.4.1']; "
                             "from envcheck.cli import entry; entry()", str(gone)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (2, "envcheck: error: the current directory no longer "
                                         "exists (deleted or unmounted): cd to one that does "
                                         "and run envcheck again\n")


def test_nvidia_smi_that_prints_undecodable_bytes_is_one_line(tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\nprintf "\\377\\376 NVIDIA A100, 8.0, 535.104.05\\n"\n')
    fake.chmod(0o755)
    res = run_cli("check", "torch==2.4.1",
                  env={"PATH": "%s%s%s" % (tmp_path, os.pathsep, os.environ["PATH"])})
    assert res.code == 2
    assert res.stderr.startswith("envcheck: error: nvidia-smi printed an unexpected line 1: ")
    assert len(res.stderr.splitlines()) == 1 and "Traceback" not in res.stderr


@pytest.mark.ranks
def test_a_flooded_report_prints_its_screen_without_searching_the_flood(tmp_path):
    """A rank's flooded stderr kept in the JSON (tens of MB): the screen shows none of it,
    so it is cut before secrets are searched; JSON and JUnit keep it whole."""
    import time

    saved = tmp_path / "r.json"
    res = run_cli("run", "-p", "launch", "--json", str(saved), "-q")
    assert res.code == 0, res.stderr
    data = json.loads(saved.read_text())
    flood = "a rank's flooded stderr, line after line after line\n" * 400000  # 20 MB
    data["checks"][3]["ranks"]["1"]["stderr_tail"] = flood + "the last line"
    flooded = tmp_path / "flooded.json"
    flooded.write_text(json.dumps(data))
    started = time.monotonic()
    shown = run_cli("report", str(flooded))
    assert shown.code == 0 and shown.stdout == run_cli("report", str(saved)).stdout
    assert time.monotonic() - started < 30  # searched in full, it took about 4 s per 20 MB
    again = run_cli("report", str(flooded), "--format", "json")
    kept = json.loads(again.stdout)["checks"][3]["ranks"]["1"]["stderr_tail"]
    assert kept == flood + "the last line"


def test_the_screen_copy_cuts_long_strings_to_their_end():
    from envcheck.cli import SCREEN_TEXT_LIMIT, _screen_sized

    long = "x" * (SCREEN_TEXT_LIMIT * 3) + "the end"
    got = _screen_sized({"checks": [{"ranks": {"1": {"stderr_tail": long, "n": 3}}}],
                         "short": "kept"})
    cut = got["checks"][0]["ranks"]["1"]["stderr_tail"]
    assert cut.startswith("…x") and cut.endswith("the end")
    assert len(cut) == SCREEN_TEXT_LIMIT + 1
    assert got["short"] == "kept" and got["checks"][0]["ranks"]["1"]["n"] == 3
