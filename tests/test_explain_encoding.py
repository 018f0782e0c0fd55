"""A log written in another Unicode encoding is read as the text it is.

Windows PowerShell 5.1's redirection operators and Out-File write UTF-16LE with a
byte-order mark (learn.microsoft.com, about_Character_Encoding), so `python train.py >
job.log` there gives a log whose every other byte is 0x00; envcheck explain refused it as
binary data. Now the mark says the encoding: the same explanation, byte for byte, as the
UTF-8 log, whether the log is a file, gzipped, or on stdin. The log is a real one: the
4-rank torchrun job of tests/test_explain_structure.py, kept."""

import codecs
import gzip
import io
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run_cli
from envcheck.explain import read

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
    if stdin is None:
        res = run_cli("explain", "--format", "json", path)
        code, out, err = res.code, res.stdout, res.stderr
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
    stream = read.recoded(io.BufferedReader(io.BytesIO(codecs.BOM_UTF16_LE
                                                       + text.encode("utf-16-le"))))
    out = b""
    while True:
        block = stream.read(chunk)
        if not block:
            break
        out += block
    assert out == text.encode("utf-8")


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
