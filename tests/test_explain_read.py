"""explain.read: a log of any size, as the lines worth matching (with their numbers)."""

import gzip
import io
import json
import os
import re
import subprocess
import sys

import pytest

from envcheck.explain import explainer as command, read

from conftest import ROOT


def _hits(data, chunk=64):
    scan = read.Scan(io.BytesIO(data), chunk=chunk)
    hits = [(h.number, h.data) for h in scan]
    return hits, scan


def test_only_lines_with_a_scan_word_are_kept_with_their_numbers():
    data = b"step 1 loss 2.0\nRuntimeError: boom\nstep 2\nNCCL WARN x\n"
    hits, scan = _hits(data)
    assert hits == [(2, b"RuntimeError: boom"), (4, b"NCCL WARN x")]
    assert (scan.lines, scan.bytes) == (4, len(data))


def _real_texts():
    """Every real text of the corpus and of the unseen logs, as bytes."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib

    texts = []
    for name in ("explain_corpus.toml", "explain_unseen.toml"):
        with open(os.path.join(ROOT, "tests", "data", name), "rb") as f:
            texts += [e["text"].encode() for e in tomllib.load(f)["entry"]]
    return texts


PLAIN = re.compile(b"|".join(re.escape(w.encode()) for w in read.SCAN_WORDS))


def test_the_factored_scan_finds_what_the_plain_alternation_finds():
    """The scan's pattern is factored by first letter for speed (bench/explain.md); it
    must start a match at exactly the positions the plain word|word|... does: on every
    real text of the corpus and the unseen logs, and on each scan word alone and run
    together with another."""
    plain = PLAIN
    texts = _real_texts()
    words = [w.encode() for w in read.SCAN_WORDS]
    texts += words + [a + b for a in words for b in words]
    assert read.SCAN.pattern != plain.pattern
    for text in texts:
        assert ([m.start() for m in read.SCAN.finditer(text)]
                == [m.start() for m in plain.finditer(text)]), text[:200]
    assert sum(1 for t in texts[:-len(words) ** 2] if read.SCAN.search(t)) > 150


def test_the_folded_first_pass_keeps_exactly_the_lines_a_scan_word_is_on():
    """The scan's first pass searches a copy of each chunk whose words' first letters are
    folded into one byte (for speed, bench/explain.md). It keeps exactly the lines the
    plain word|word|... finds: on every real text of the corpus and the unseen logs, each
    scan word alone, and each word with its first letter swapped for another word's
    (which folds to the same bytes and must not be kept), at any chunk size."""
    plain = PLAIN
    lines = [line for text in _real_texts() for line in text.split(b"\n")]
    words = [w.encode() for w in read.SCAN_WORDS]
    firsts = sorted({w[:1] for w in words})
    swapped = [f + w[1:] for w in words for f in firsts if f != w[:1]]
    assert sum(1 for s in swapped if not plain.search(s)) > len(words) * 5
    lines += [b"step 7 " + w + b" tail" for w in words + swapped]
    data = b"\n".join(lines) + b"\n"
    want = [(i + 1, l) for i, l in enumerate(lines) if plain.search(l)]
    assert 300 < len(want) < len(lines)
    for chunk in (97, 4096, 1 << 20):
        hits, scan = _hits(data, chunk)
        assert hits == want
        assert scan.lines == len(lines)


def test_chunk_boundaries_do_not_split_lines_or_shift_numbers():
    lines = [b"progress %d of a long training run" % i for i in range(300)]
    lines[123] = b"[rank2]: RuntimeError: CUDA error: out of memory"
    lines[299] = b"NCCL WARN last line, no newline"
    data = b"\n".join(lines)
    for chunk in (7, 64, 1000, 1 << 20):
        hits, scan = _hits(data, chunk)
        assert hits == [(124, lines[123]), (300, lines[299])]
        assert scan.lines == 300


def test_a_line_without_end_is_cut_around_the_hit():
    data = b"x" * (read.MAX_LINE * 10) + b"RuntimeError: deep inside" + b"y" * (read.MAX_LINE * 10)
    hits, _ = _hits(data, chunk=4096)
    assert len(hits) == 1
    assert b"RuntimeError: deep inside" in hits[0][1]
    assert len(hits[0][1]) <= read.MAX_LINE + 64


def test_context_lines_come_with_a_hit():
    data = b"a\nb\nc\nd\ne\nf\ng\nSIGABRT here\n"
    scan = read.Scan(io.BytesIO(data))
    (hit,) = list(scan)
    assert hit.before == [b"b", b"c", b"d", b"e", b"f", b"g"]


def test_gzipped_log_is_read_as_it_decompresses(tmp_path):
    path = tmp_path / "job.log.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"ok\n[rank1]: RuntimeError: CUDA error: no kernel image is available for "
                b"execution on the device\n")
    result = command.explain([str(path)])
    assert [f.signature.id for f in result.findings] == ["cuda.no_kernel_image"]
    assert result.findings[0].ranks == {1}


# The peak of this process's own memory: VmHWM (ru_maxrss would carry over the peak of
# the process that forked it, here pytest's, across exec).
MEMORY = r"""
import sys
from envcheck.explain import explainer as command
result = command.explain([sys.argv[1]])
with open("/proc/self/status") as f:
    peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
print(peak, len(result.findings), result.inputs[0]["lines"])
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmHWM in /proc")
def test_memory_stays_flat_on_a_log_larger_than_it(tmp_path):
    # 160 MB of progress lines with one error near the end: the peak memory of the
    # process stays far below the log's size (figures for 2 GB: bench/explain.md).
    line = b"[rank3]: step 123 loss=2.3456 lr=3.0e-4 grad_norm=0.98 tokens/s=123456\n"
    block = line * 20000
    path = tmp_path / "big.log"
    with open(path, "wb") as f:
        for _ in range(112):
            f.write(block)
        f.write(b"[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    size = os.path.getsize(path)
    proc = subprocess.run([sys.executable, "-c", MEMORY, str(path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    peak_kib, found, lines = (int(x) for x in proc.stdout.split())
    assert (found, lines) == (1, 112 * 20000 + 1)
    assert peak_kib * 1024 < size / 2


def test_an_error_across_the_flush_of_an_endless_cr_line_is_found_once():
    # A progress bar redrawn with CR, no newline for longer than envcheck holds (the
    # line is searched and flushed every 4 * MAX_LINE bytes): wherever the error falls
    # against a read and a flush, it is found, once. Before, an error cut by the flush
    # was lost.
    seg = b"\rprogress 50% |#####     | 1234/5678 [00:01<00:02]"
    err = b"\rRuntimeError: CUDA error: out of memory"
    missed = []
    for pos in range(4 * read.MAX_LINE - 200, 4 * read.MAX_LINE + 8400, 11):
        filler = (seg * (pos // len(seg) + 1))[:pos]
        data = b"start\n" + filler + err + seg * 10 + b"\nend\n"
        found = [h for h in read.Scan(io.BytesIO(data), chunk=4096)
                 if b"out of memory" in h.data]
        if len(found) != 1 or found[0].number != 2:
            missed.append((pos, len(found)))
    assert missed == []


def test_a_pipe_among_several_logs_is_read_once_whole(tmp_path):
    # A named pipe among the logs: explain reads each log's end for its torchrun
    # summary before reading it through, but a pipe can be opened and read only once,
    # by the scan (a second open waited for a writer that had gone: explain hung).
    log = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-user-error.log")
    with open(log, "rb") as f:
        data = f.read()
    fifo = str(tmp_path / "node2.log")
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "envcheck", "explain", "--format", "json",
                             log, fifo], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    with open(fifo, "wb") as f:
        f.write(data)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    inputs = json.loads(out)["inputs"]
    assert [i["lines"] for i in inputs] == [data.count(b"\n")] * 2
