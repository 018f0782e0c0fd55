"""Read a log of any size as raw bytes and hand on only the lines worth matching.

A training log is mostly progress lines. Decoding and splitting every line in Python
would take minutes for 2 GB; instead each chunk is searched, as bytes, for the words a
signature or a version fact can start from (``signatures.SCAN_WORDS``, and the paths
that show a training framework). Only the lines around a hit are cut out, with a few
lines before them (the context a launcher's summary keeps the rank in). Memory stays at
one chunk plus one unfinished line, whatever the size of the log, and a line is never
longer than ``MAX_LINE`` (a progress bar redrawn with CR for hours is one "line").
"""

import codecs
import json
import re

from ..matrix.signatures import SCAN_WORDS

CHUNK = 8 << 20
MAX_LINE = 16 << 10  # bytes kept around a hit in a longer line
CONTEXT = 6  # lines kept before a hit
LOOKBACK_LINES = 400  # a traceback's frames, read back from its exception line
LOOKBACK_BYTES = 64 << 10

# Paths in a traceback that show which training framework ran the job (keys of
# core.frameworks.FRAMEWORKS).
FRAMEWORK_MARKS = {"lightning": (b"/lightning/", b"/pytorch_lightning/", b"/lightning_fabric/"),
                   "accelerate": (b"/accelerate/",), "deepspeed": (b"/deepspeed/",)}

# The framework shows in the traceback around an error: looked for in the bytes around a
# hit (FRAMEWORK_WINDOW before and after, each byte once, not around NCCL's own INFO
# lines, which can fill a log), until one is found; not in every line.
FRAMEWORK_WINDOW = 64 << 10

HEAD = 8 << 10  # bytes looked at to tell a log from something that is not one
# The log's last bytes, kept as it is read: where a log ends inside a traceback (copied
# short, or a job killed while printing it), its frames are there and no exception line
# is (structure.cut_traceback).
TAIL = 16 << 10


class NotALog(ValueError):
    """The input is empty or binary data: the message says which (after its name)."""


class EmptyLog(NotALog):
    """The input holds nothing: among other logs, a rank that printed nothing (torchrun's
    --log-dir keeps an empty stdout.log for most ranks), or whose log a crash left as
    zeros."""


# A run of NUL bytes in a text log is what a crash left of it: the file's size was on
# disk, its data was not, and the filesystem serves zeros there (xfs.org, XFS FAQ: "Why
# do I see binary NULLS in some files after recovery"; ext4's delayed allocation alike).
# The log of a node that crashed is the one to explain: such runs are read past (a run
# cut by a chunk's end leaves a few, which line.clean drops); a NUL between other bytes
# is binary data still (UTF-16 without its mark, a checkpoint).
NUL_RUN = re.compile(b"\x00{8,}")


def check_head(head):
    """Raise NotALog when the first bytes of an input cannot be a log's."""
    if not head:
        raise EmptyLog("is empty: there is no log in it")
    sample = NUL_RUN.sub(b"", head)[:HEAD] if b"\x00" in head[:HEAD] else head[:HEAD]
    if not sample:  # among other logs, a rank's log a crash left nothing of
        raise EmptyLog("holds only NUL bytes where its log should be (what a crash leaves "
                       "of a file whose data was never written)")
    if b"\x00" in sample or sample.decode("utf-8", "replace").count("\ufffd") > len(sample) // 4:
        raise NotALog("holds binary data, not a text log (give the job's output, or its "
                      ".gz)")


def _trie(words):
    """A pattern for ``words`` (bytes) as a tree of their shared prefixes, so that ``re``
    settles each next byte with one branch test, not one per word."""
    if b"" in words:
        rest = [w for w in words if w]
        return b"(?:" + _trie(rest) + b")?" if rest else b""
    groups = {}
    for w in words:
        groups.setdefault(w[:1], []).append(w[1:])
    alts = [re.escape(k) + _trie(v) for k, v in sorted(groups.items())]
    if len(alts) == 1:
        return alts[0]
    # many branches: one test of the next byte against the set of their first bytes
    # settles a byte none of them starts with (a line of dashes after '--')
    ahead = (b"(?=[" + b"".join(re.escape(k) for k in sorted(groups)) + b"])"
             if len(alts) > 4 else b"")
    return ahead + b"(?:" + b"|".join(alts) + b")"


def scan_pattern(words):
    """One regular expression for ``words``, factored by first letter
    (``E(?:rror|RROR|...)|N(?:CCL|...)``): the same lines as the plain alternation
    (``word|word|...``), at about 0.9 times its CPU, because at each byte ``re`` tries
    one branch per first letter instead of one per word (bench/explain.md). The words
    under one first letter are a tree of their shared prefixes (``_trie``): where many
    share one (torchrun's options under ``--``, issue #34 phase H), a line of dashes is
    settled with a branch test a byte, not one test per word."""
    groups = {}
    for w in words:
        groups.setdefault(w[0], []).append(w[1:].encode())
    return re.compile(b"|".join(
        re.escape(first.encode()) + b"(?:" + _trie(sorted(set(tails))) + b")"
        for first, tails in groups.items()))


SCAN = scan_pattern(SCAN_WORDS)


def fold_table(words):
    """A ``bytes.translate`` table that folds every byte a word starts with into one
    byte, 0x01 (a control character no log line of interest holds)."""
    table = bytearray(range(256))
    for w in words:
        table[ord(w[0])] = 1
    return bytes(table)


# The scan's first pass runs on a folded copy of each chunk: every byte a scan word starts
# with becomes 0x01, so the pattern (the folded words) starts with one literal byte,
# which ``re`` finds at memchr speed instead of testing every byte against a set of first
# letters; about half the CPU of the search (bench/explain.md). Folding can make a line
# match that holds no scan word (a first letter in place of another), so each line the
# folded pass finds is confirmed on its real bytes with SCAN: the lines kept are exactly
# SCAN's (tests/test_explain_read.py).
FOLD = fold_table(SCAN_WORDS)
FOLDED = re.compile(_trie(sorted({w.encode().translate(FOLD) for w in SCAN_WORDS})))


class Hit:
    """One line worth matching: its number (1-based), its bytes, the lines before it,
    and the frameworks (keys of FRAMEWORK_MARKS) whose files the traceback above shows.
    ``lookback()`` gives more of the lines before it (a traceback's frames), from the
    chunk the line was found in, ``following()`` the lines after it (one pasted in
    reverse): only for the few lines that need them."""

    __slots__ = ("number", "data", "before", "frameworks", "_buf", "_start")

    def __init__(self, number, data, before, frameworks=(), buf=b"", start=0):
        self.number = number
        self.data = data
        self.before = before
        self.frameworks = frameworks
        self._buf = buf
        self._start = start

    def lookback(self, lines=LOOKBACK_LINES, limit=LOOKBACK_BYTES):
        """Up to ``lines`` lines (bytes, oldest first) before this one, within ``limit``
        bytes and this line's chunk."""
        buf, lo = self._buf, self._start
        for _ in range(lines):
            if lo == 0:
                break
            lo = buf.rfind(b"\n", 0, lo - 1) + 1
        lo = max(lo, self._start - limit)
        return buf[lo:self._start].split(b"\n")[:-1]

    def following(self, lines):
        """The lines (bytes) after this one, one at a time, up to ``lines``, within its
        chunk: read only as far as the caller goes."""
        buf = self._buf
        end = buf.find(b"\n", self._start)
        for _ in range(lines):
            if end < 0:
                return
            nxt = buf.find(b"\n", end + 1)
            if nxt < 0:
                return
            yield buf[end + 1:nxt]
            end = nxt


def _frameworks(window):
    return tuple(k for k, marks in FRAMEWORK_MARKS.items() if any(m in window for m in marks))


def _context(buf, start):
    """Up to CONTEXT lines ending just before ``start`` (bytes, oldest first)."""
    lo = start
    for _ in range(CONTEXT):
        if lo == 0:
            break
        lo = buf.rfind(b"\n", 0, lo - 1) + 1
    lo = max(lo, start - MAX_LINE)
    return buf[lo:start].split(b"\n")[:-1]


def hit_in(lines, index, number):
    """A ``Hit`` for ``lines[index]`` (bytes, oldest first: a log's last lines, which the
    scan did not take for a hit) numbered ``number``, with the lines above it to look
    back through."""
    buf = b"\n".join(lines[:index + 1]) + b"\n"
    start = len(buf) - len(lines[index]) - 1
    return Hit(number, lines[index], _context(buf, start), (), buf, start)


def _hits(buf, first_number, size, begin=0):
    """The hits in ``buf[begin:size]``, whole lines; returns (hits, the next line's
    number)."""
    out = []
    pos = begin
    number = first_number
    counted = begin  # newlines counted up to here
    search = SCAN.search
    folded, fsearch = buf.translate(FOLD), FOLDED.search
    looked = 0  # the bytes before this were searched for frameworks already
    while True:
        m = fsearch(folded, pos, size)
        if m is None:
            break
        maybe = m.start()
        end = buf.find(b"\n", maybe, size)
        if end < 0:
            end = size
        m = search(buf, maybe, end)
        if m is None:  # folding made the match: no scan word on this line
            pos = end + 1
            continue
        at = m.start()
        start = buf.rfind(b"\n", 0, at) + 1
        number += buf.count(b"\n", counted, start)
        counted = start
        data = buf[start:end]
        if len(data) > MAX_LINE:
            rel = at - start
            lo = data.rfind(b"\r", 0, rel) + 1
            hi = data.find(b"\r", rel)
            hi = len(data) if hi < 0 else hi
            lo, hi = max(lo, rel - MAX_LINE // 2), min(hi, rel + MAX_LINE // 2)
            data = data[lo:hi]
        frameworks = ()
        if looked is not None and end > looked and b"NCCL INFO" not in data:
            until = min(size, end + FRAMEWORK_WINDOW)
            frameworks = _frameworks(buf[max(looked, start - FRAMEWORK_WINDOW):until])
            looked = None if frameworks else until
        out.append(Hit(number, data, _context(buf, start), frameworks, buf, start))
        pos = end + 1
    return out, number + buf.count(b"\n", counted, size)


def _flush(carry, number):
    """A line too long to hold (a progress bar redrawn with CR for hours): its hits up to
    the last CR before its last MAX_LINE bytes, and the rest, kept to be joined to what
    comes next. A redraw is never cut in two, so an error the next read completes is not
    lost; a line with no CR there is cut MAX_LINE bytes from its end. No newline is in
    ``carry``: the line number stays."""
    at = carry.rfind(b"\r", 0, len(carry) - MAX_LINE)
    if at <= 0:
        at = len(carry) - MAX_LINE
    hits, _ = _hits(carry, number, at)
    return hits, carry[at:]


# Byte-order marks, longest first: a log written as UTF-16 (Windows PowerShell 5.1's
# redirection operators and Out-File write UTF-16LE with its mark: learn.microsoft.com,
# about_Character_Encoding) or UTF-32 is read as the UTF-8 it says; UTF-8's own mark is
# dropped (it would sit before the first line's prefix)
BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
        (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"), (b"\xef\xbb\xbf", None))


class Recoded:
    """A stream of another Unicode encoding, read as UTF-8 bytes, a chunk at a time (an
    incremental decoder: a character cut between two chunks is joined, memory stays
    flat); bytes that do not decode become U+FFFD, as a UTF-8 log's do."""

    def __init__(self, stream, encoding):
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder(encoding)(errors="replace")

    def read(self, size=-1):
        while True:
            raw = self.stream.read(size)
            text = self.decoder.decode(raw, final=not raw)
            if text or not raw:
                return text.encode("utf-8")

    def close(self):
        self.stream.close()


def recoded(stream):
    """``stream`` (binary, with ``peek``) as UTF-8 bytes: past a byte-order mark, the
    encoding it names read as UTF-8 (``Recoded``); without one, as it is."""
    head = stream.peek(4)[:4] if hasattr(stream, "peek") else b""
    for mark, encoding in BOMS:
        if head.startswith(mark):
            stream.read(len(mark))
            return Recoded(stream, encoding) if encoding else stream
    return stream


# Where a log shipper or a container runtime puts the text a job logged, in a log whose
# every line is a JSON object: Docker's json-file driver and Fluent Bit ("log"),
# CloudWatch Logs' and Datadog's exports ("message"), Cloud Logging's ("textPayload",
# or "message" of its "jsonPayload"), journald's `journalctl -o json` ("MESSAGE"),
# structlog and zap ("msg"), Loki ("line")
MESSAGE_KEYS = ("log", "message", "textPayload", "jsonPayload", "MESSAGE", "msg", "line")
JSON_HEAD = 64 << 10  # the bytes the first line of a JSON log is looked for in
JSON_LINE_MAX = 1 << 20  # a longer "line" is no entry: passed on as it is


def _message(entry):
    """The text a JSON log entry (a dict) holds, or None. torch elastic's error file
    (``@record``: ``{"message": {"message": "TYPE: ...", "extraInfo": {"py_callstack":
    TRACEBACK}}}``, torch/distributed/elastic/multiprocessing/errors/error_handler.py)
    holds the rank's whole traceback."""
    for key in MESSAGE_KEYS:
        value = entry.get(key)
        if key == "jsonPayload" and isinstance(value, dict):
            value = value.get("message")
        if key == "message" and isinstance(value, dict):
            extra = value.get("extraInfo")
            stack = extra.get("py_callstack") if isinstance(extra, dict) else None
            value = stack if isinstance(stack, str) and stack.strip() else value.get("message")
        if isinstance(value, str):
            return value
    return None


def _entry_text(line, prefix=b""):
    """The text a line of a JSON log stands for (bytes, ending with a newline): an
    entry's message, each of its lines after ``prefix``, or the line itself where it is
    not an entry."""
    body = line.strip()
    if body[:1] == b"{" and body[-1:] == b"}":
        try:
            entry = json.loads(body)
        except ValueError:
            entry = None
        text = _message(entry) if isinstance(entry, dict) else None
        if text is not None:
            text = text.encode("utf-8", "replace") + (b"" if text.endswith("\n") else b"\n")
            if prefix:
                text = b"".join(prefix + part for part in text.splitlines(True))
            return text
    return line + b"\n"


class _Pushback:
    """A stream whose first bytes, already read, are given back first."""

    def __init__(self, head, stream):
        self.head, self.stream = head, stream

    def read(self, size=-1):
        if self.head:
            out, self.head = (self.head, b"") if size < 0 else (self.head[:size],
                                                                 self.head[size:])
            return out
        return self.stream.read(size)

    def close(self):
        self.stream.close()


class Entries:
    """A log whose lines are JSON objects, one entry a line, read as the text they hold
    (``_message``): a traceback in one entry's message is its lines again, each entry of
    Docker's json-file driver one line of the job's output. A line that is not an entry
    is passed on as it is. Line numbers are those of the text: an entry of several lines
    counts each."""

    def __init__(self, stream, prefix=b""):
        self.stream = stream
        self.prefix = prefix  # before each line of an entry's text (an error file's rank)
        self.carry = b""
        self.done = False

    def read(self, size=-1):
        out = b""
        while not out and not self.done:
            block = self.stream.read(size)
            if not block:
                self.done = True
                lines, self.carry = ([self.carry] if self.carry else []), b""
            else:
                lines = (self.carry + block).split(b"\n")
                self.carry = lines.pop()
                if len(self.carry) > JSON_LINE_MAX:  # no entry: on as it is
                    out, self.carry = self.carry, b""
            out = b"".join(_entry_text(line, self.prefix) for line in lines) + out
        return out

    def close(self):
        self.stream.close()


# torch elastic's error file where torchrun's --log-dir keeps it: its directory is the
# rank's local rank ('{log_dir}/{run_id}/attempt_{n}/{local_rank}/error.json'), given to
# its lines as torchrun --tee's prefix would ('[default2]:')
ERROR_FILE = re.compile(r"(?:^|[/\\])attempt_\d+[/\\](\d+)[/\\]error\.json$")


# A JSON document of log entries, as a cloud's command line prints them, pretty-printed:
# `gcloud logging read --format=json` (an array of LogEntry objects, newest first by
# default), `aws logs get-log-events` / `filter-log-events` (an object whose "events"
# each hold a "message"). It is told by its start, an array of objects or an object whose
# first key is quoted (a log's '[rank3]: ...' is neither), and read whole, up to this size
# (gcloud's and the AWS CLI's pages are a few MB); a larger one is read as text.
JSON_DOCUMENT_MAX = 32 << 20
JSON_DOCUMENT = re.compile(rb'\s*(?:\[\s*\{|\{\s*")')


def _document_text(data):
    """The text of a JSON document of log entries (bytes), oldest first, or None where
    ``data`` is not one."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    entries = doc.get("events") if isinstance(doc, dict) else doc
    if not isinstance(entries, list) or not entries or not all(
            isinstance(e, dict) and _message(e) is not None for e in entries):
        return None
    times = [e.get("timestamp") for e in entries]
    if all(isinstance(t, (int, float)) for t in times) or all(
            isinstance(t, str) for t in times):
        if times[0] > times[-1]:  # newest first (gcloud's default): the file reversed
            entries = entries[::-1]
        entries = sorted(entries, key=lambda e: e["timestamp"])
    out = []
    for e in entries:
        text = _message(e)
        out.append(text if text.endswith("\n") else text + "\n")
    return "".join(out).encode("utf-8", "replace")


def unwrapped(stream, name=""):
    """``stream`` (binary; ``name``, its path) as the text its job logged: where its
    first line is a JSON object holding a message (``_message``), its entries' text
    (``Entries``; an error file's lines under its local rank); a JSON document of
    entries (``_document_text``), their text; else as it is."""
    head = stream.read(JSON_HEAD)
    first = head.lstrip().split(b"\n", 1)[0].strip()
    try:
        entry = json.loads(first) if first[:1] == b"{" else None
    except ValueError:
        entry = None
    if isinstance(entry, dict) and _message(entry) is not None:
        local = ERROR_FILE.search(name)
        return Entries(_Pushback(head, stream),
                       b"[default%s]:" % local.group(1).encode() if local else b"")
    if entry is None and JSON_DOCUMENT.match(head):
        data = head + stream.read(max(1, JSON_DOCUMENT_MAX - len(head) + 1))
        text = _document_text(data) if len(data) <= JSON_DOCUMENT_MAX else None
        if text is not None:  # the stream is at its end: read whole
            return _Pushback(text, stream)
        head = data
    return _Pushback(head, stream)


def opened(stream, name=""):
    """A log's binary stream (``name``, its path) as UTF-8 text's bytes: recoded past a
    byte-order mark (``recoded``), its entries' text where it is a JSON log
    (``unwrapped``)."""
    return unwrapped(recoded(stream), name)


class Scan:
    """Iterate over the ``Hit``s of a binary stream, in order; afterwards ``lines`` and
    ``bytes`` say how much was read."""

    def __init__(self, stream, chunk=CHUNK):
        self.stream = stream
        self.chunk = chunk
        self.lines = 0
        self.bytes = 0
        self._tail = b""

    def tail(self):
        """The whole lines among the log's last TAIL bytes (bytes, oldest first; the first
        one, cut by the limit, left out), once it has been read."""
        lines = self._tail.split(b"\n")
        if self.bytes > len(self._tail):
            lines = lines[1:]
        return lines

    def __iter__(self):
        # Each chunk is searched where it lies; only the line cut in two at its end is
        # carried over, and joined to the head of the next chunk on its own.
        carry = b""
        number = 1
        first = True
        while True:
            block = self.stream.read(self.chunk)
            if first:
                check_head(block)
                first = False
            if not block:
                break
            self.bytes += len(block)
            if b"\x00" in block:  # a crash's zeros, read past (NUL_RUN)
                block = NUL_RUN.sub(b"", block)
            self._tail = (block if len(block) >= TAIL else self._tail + block)[-TAIL:]
            begin = 0
            if carry:
                nl = block.find(b"\n")
                if nl < 0:
                    carry += block
                    if len(carry) > 4 * MAX_LINE:  # a line with no end in sight
                        hits, carry = _flush(carry, number)
                        yield from hits
                    continue
                head = carry + block[:nl + 1]
                hits, number = _hits(head, number, len(head))
                yield from hits
                begin = nl + 1
            cut = block.rfind(b"\n", begin)
            if cut < 0:
                carry = block[begin:]
                if len(carry) > 4 * MAX_LINE:
                    hits, carry = _flush(carry, number)
                    yield from hits
                continue
            hits, number = _hits(block, number, cut + 1, begin)
            yield from hits
            carry = block[cut + 1:]
        if carry:
            hits, number = _hits(carry + b"\n", number, len(carry) + 1)
            yield from hits
        self.lines = number - 1
