"""A log written in another Unicode encoding, or as JSON entries, is read as the text it is.

Windows PowerShell 5.1's redirection operators and Out-File write UTF-16LE with a
byte-order mark (learn.microsoft.com, about_Character_Encoding), so `python train.py >
job.log` there gives a log whose every other byte is 0x00; envcheck explain refused it as
binary data. Now the mark says the encoding: the same explanation, byte for byte, as the
UTF-8 log, whether the log is a file, gzipped, or on stdin.

A container runtime or a log shipper writes a JSON object a line, the job's text in one
of its fields: Docker's json-file driver ({"log": "...\\n", "stream": "stderr", "time":
...}, docs.docker.com, "JSON File logging driver"), Cloud Logging's LogEntry
("textPayload", or "message" in "jsonPayload"), CloudWatch Logs' events ("message"),
journald's `journalctl -o json` ("MESSAGE"). explain read the JSON as text: its
tracebacks, escaped into strings, were no tracebacks, and the real 4-rank job's log
led with the other ranks' closed connection, not rank 2's own error. Now each entry is
its text.

The log is a real one: the 4-rank torchrun job of tests/test_explain_structure.py, kept."""

import codecs
import gzip
import io
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli
from envcheck.explain import explainer, line, read
from envcheck.render import explanation

KEPT = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-user-error.log")
with open(KEPT, encoding="utf-8") as f:
    TEXT = f.read()

# how each encoding writes the text: the mark, then the text (Python's "utf-16" writes
# the mark of this machine's byte order; these name it)
MARKED = {
    "utf-16-le": codecs.BOM_UTF16_LE + TEXT.replace("\n", "\r\n").encode("utf-16-le"),
    "utf-16-be": codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
    "utf-32-le": codecs.BOM_UTF32_LE + TEXT.encode("utf-32-le"),
    "utf-8-sig": codecs.BOM_UTF8 + TEXT.encode("utf-8"),
}


def _json(path, stdin=None):
    if stdin is None:  # in this process: the CLI's own run is the stdin case's
        code, out, err = 0, explanation.to_json(explainer.explain([path])), ""
    else:  # run_cli gives no stdin
        proc = subprocess.run([sys.executable, "-m", "envcheck", "explain", "--format",
                               "json", path], input=stdin, capture_output=True, cwd=ROOT,
                              timeout=180)
        code, out, err = proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    assert code == 0, (out, err)
    data = json.loads(out)
    for entry in data["inputs"]:
        entry.pop("bytes")  # as read: UTF-8's count, whatever the file's encoding
    # the log's name, wherever a line is placed ('job.log:88'), is the only other change
    name = "<stdin>" if stdin is not None else path
    return json.loads(json.dumps(data).replace(json.dumps(name)[1:-1], "LOG"))


def _blocks(data, chunk):
    """What explain's scan reads of ``data`` (a log's bytes), ``chunk`` bytes a read."""
    stream = read.opened(io.BufferedReader(io.BytesIO(data)))
    blocks = []
    while True:
        block = stream.read(chunk)
        if not block:
            return blocks
        blocks.append(block)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _json(KEPT)


@pytest.mark.parametrize("encoding", sorted(MARKED))
def test_a_log_with_a_byte_order_mark_explains_as_its_utf8_does(encoding, tmp_path, plain):
    log = tmp_path / "job.log"
    log.write_bytes(MARKED[encoding])
    assert _json(str(log)) == plain
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(MARKED[encoding]))
    assert _json(str(packed)) == plain


def test_powershells_log_on_stdin_explains_as_its_utf8_does(plain):
    assert _json("-", stdin=MARKED["utf-16-le"]) == plain


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_characters_cut_between_chunks_are_joined(chunk):
    # a character outside the BMP (a surrogate pair in UTF-16) and one of two bytes,
    # read a few bytes at a time: every line as UTF-8 has it
    text = "[rank0]: RuntimeError: 🔥 naïve\n" * 50
    data = codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    assert b"".join(_blocks(data, chunk)) == text.encode("utf-8")


def test_an_odd_byte_at_the_end_is_a_replacement_character_not_an_error(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(MARKED["utf-16-le"] + b"\x41")
    res = run_cli("explain", str(log))
    assert res.code == 0 and "Traceback" not in res.stdout + res.stderr, res


def test_a_mark_alone_is_an_empty_log(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(codecs.BOM_UTF16_LE)
    res = run_cli("explain", str(log))
    assert res.code == 2 and res.stderr.strip() == (
        "envcheck: error: %s is empty: there is no log in it" % log), res


def test_utf16_without_a_mark_is_still_binary_data(tmp_path):
    # no mark, no way to know: refused, as before, in one line
    log = tmp_path / "job.log"
    log.write_bytes(TEXT.encode("utf-16-le"))
    res = run_cli("explain", str(log))
    assert res.code == 2 and "holds binary data" in res.stderr, res


def _entries(key, text=TEXT, per_line=True, **extra):
    """``text`` as a JSON log: an entry a line of it, or one entry holding it whole."""
    parts = text.splitlines(True) if per_line else [text]

    def entry(part):
        if key == "jsonPayload":
            return dict(extra, jsonPayload={"message": part, "logger": "train"})
        return dict(extra, **{key: part})
    return "".join(json.dumps(entry(p)) + "\n" for p in parts).encode()


# (key, one entry a line of the log, or one entry for it all): as each writes it
SHAPES = {
    "docker-json-file": ("log", True, {"stream": "stderr", "time": "2026-11-27T04:00:00Z"}),
    "cloud-logging-text": ("textPayload", False, {"severity": "ERROR"}),
    "cloud-logging-json": ("jsonPayload", True, {"severity": "ERROR"}),
    "cloudwatch": ("message", True, {"timestamp": 1764216000000}),
    "journald": ("MESSAGE", True, {"_PID": "4242", "PRIORITY": "3"}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_json_log_explains_as_the_text_it_holds(shape, tmp_path, plain):
    key, per_line, extra = SHAPES[shape]
    log = tmp_path / "job.json"
    log.write_bytes(_entries(key, per_line=per_line, **extra))
    assert _json(str(log)) == plain
    packed = tmp_path / "job.json.gz"
    packed.write_bytes(gzip.compress(log.read_bytes()))
    assert _json(str(packed)) == plain


def test_a_json_log_on_stdin_explains_as_the_text_it_holds(plain):
    assert _json("-", stdin=_entries("log")) == plain


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_entries_read_in_any_chunks_give_the_same_text(chunk):
    data = _entries("log", stream="stdout") + b"not an entry\n" + _entries(
        "message", text="last words\nof the job")
    text = b"".join(_blocks(data, chunk)).decode()
    assert text == TEXT + "not an entry\nlast words\nof the job\n"


def test_json_lines_that_hold_no_message_are_read_as_they_are(tmp_path):
    # a metrics file, a JSON report: no entry's text to read, so the lines themselves
    data = b'{"step": 1, "loss": 2.3}\n{"step": 2, "loss": 2.1}\n'
    assert b"".join(_blocks(data, 4096)) == data


def test_an_entry_line_past_the_limit_is_passed_on_as_it_is():
    # a "line" of 3 MiB with no newline in a JSON log: no entry, and never held whole
    data = _entries("log", text="first\n") + b"{" + b"x" * (3 << 20)
    blocks = _blocks(data, read.JSON_LINE_MAX // 2)
    assert b"".join(blocks) == b"first\n" + b"{" + b"x" * (3 << 20) + b"\n"
    assert max(map(len, blocks)) <= 2 * read.JSON_LINE_MAX


# A crash leaves zeros where a log's data was never written (xfs.org, XFS FAQ: "Why do I
# see binary NULLS in some files after recovery"): the log of a node that crashed, which
# explain refused as binary data.
ZEROS = b"\x00" * 20000
CRASHED = {
    "head": ZEROS + TEXT.encode(),
    "inside-a-line": TEXT.encode()[:3000] + ZEROS + TEXT.encode()[3000:],
    "between-lines": TEXT.encode().replace(b"\n", b"\n" + ZEROS, 1),
    "tail": TEXT.encode() + ZEROS,
}


@pytest.mark.parametrize("where", sorted(CRASHED))
def test_a_log_a_crash_left_zeros_in_explains_as_its_text_does(where, tmp_path, plain):
    log = tmp_path / "job.log"
    log.write_bytes(CRASHED[where])
    assert _json(str(log)) == plain


def test_zeros_alone_are_no_log(tmp_path):
    log = tmp_path / "job.log"
    log.write_bytes(ZEROS)
    res = run_cli("explain", str(log))
    assert res.code == 2 and res.stderr.startswith(
        "envcheck: error: %s holds only NUL bytes where its log should be" % log), res
    assert len(res.stderr.splitlines()) == 1
    # beside another rank's log, it is a log with nothing in it: said, not a refusal
    other = tmp_path / "other.log"
    other.write_bytes(TEXT.encode())
    res = run_cli("explain", "--no-color", str(log), str(other))
    assert res.code == 0 and res.stdout.startswith(
        "envcheck explain: 1 cause found in %s (empty), %s (92 lines)" % (log, other)), res


@pytest.mark.parametrize("chunk", [4096, 7919, 1 << 20])
def test_zeros_across_chunks_are_read_past_as_whole(chunk):
    # a run of zeros longer than a chunk, and one cut by a chunk's end: the same lines
    # as the text has, whatever the chunk
    def hits(data):
        return [(h.number, line.clean(h.data)) for h in read.Scan(io.BytesIO(data), chunk)]
    assert hits(CRASHED["inside-a-line"]) == hits(TEXT.encode())


# A JSON document of entries, as clouds' command lines print them, pretty-printed:
# `gcloud logging read --format=json` (an array of LogEntry, newest first by default),
# `aws logs get-log-events` ({"events": [{"timestamp", "message"}, ...]})
def _gcloud(newest_first=True):
    lines = TEXT.splitlines(True)
    entries = [{"textPayload": text, "timestamp": "2026-11-27T04:00:00.%06dZ" % i,
                "severity": "ERROR", "resource": {"type": "k8s_container"}}
               for i, text in enumerate(lines)]
    return json.dumps(entries[::-1] if newest_first else entries, indent=2).encode()


def _aws():
    return json.dumps({"events": [
        {"logStreamName": "job", "timestamp": 1764216000000 + i, "message": text.rstrip("\n"),
         "ingestionTime": 1764216000500 + i} for i, text in enumerate(TEXT.splitlines(True))],
        "nextForwardToken": "f/1"}, indent=4).encode()


DOCUMENTS = {"gcloud-newest-first": _gcloud(), "gcloud-oldest-first": _gcloud(False),
             "aws-events": _aws()}


@pytest.mark.parametrize("tool", sorted(DOCUMENTS))
def test_a_clouds_json_document_explains_as_the_text_it_holds(tool, tmp_path, plain):
    log = tmp_path / "job.json"
    log.write_bytes(DOCUMENTS[tool])
    assert _json(str(log)) == plain


def test_a_json_document_of_no_entries_or_too_large_is_read_as_text(tmp_path, monkeypatch):
    report = json.dumps({"checks": [{"id": "nccl.init", "outcome": "failed"}]}, indent=2)
    assert b"".join(_blocks(report.encode(), 4096)) == report.encode()
    monkeypatch.setattr(read, "JSON_DOCUMENT_MAX", 1000)
    data = DOCUMENTS["aws-events"]
    assert b"".join(_blocks(data, 4096)) == data


def test_a_log_that_starts_with_a_bracket_is_never_read_whole(monkeypatch):
    # '[rank3]: ...', '[2026-11-27 ...]': a log, read a chunk at a time as ever
    monkeypatch.setattr(read, "_document_text", None)  # would raise if it were tried
    for data in (b"[rank3]: step 1\n" * 10000, b"[2026-11-27 04:00:01] start\n{x}\n"):
        assert b"".join(_blocks(data, 4096)) == data
