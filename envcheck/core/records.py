"""The record stream a rank writes, and the one way to read it back.

One JSON object per line in ``records-rank{RANK}.jsonl``, flushed after every record so
that what a rank said before a SIGKILL or a segfault is still there to read. The record
types, in the order a rank writes them:

- ``hello``: the rank started and imported torch (``torch_import_s``); ``thread``, its
  main thread as its stack dumps name it.
- ``launch``: (launcher mode only) launcher, world size, the plan.
- ``env``: what this rank sees of its environment (rank 0 collects the full picture).
- ``setup_start`` / ``setup``: init_process_group, with outcome, seconds and error.
- ``probe_start`` / ``check_start`` / ``check`` / ``probe_end``: one probe at a time;
  ``round`` (the ``repeat`` probe, ``--repeat``): its next round began, and its limit
  is counted afresh (``phases.py``).
- ``teardown_start`` / ``teardown``: the final barrier (``teardown`` only when it failed).
- ``hang``: (launcher mode only) the rank's watcher saw no progress past the timeout.
- ``bye``: the rank finished its plan.

Both drivers read these with the same functions: the local supervisor while the ranks
run (``RecordTail``), launcher mode's report from files after the job (``parse``). A
line that is not a whole record — the last one of a rank killed mid-write, or the same
torn line in the middle of a file that concatenates several ranks' streams — is skipped
and counted, never fatal.
"""

import json
import os
import time

MERGED_RECORDS = "records.jsonl"  # launcher mode: rank 0's gathered copy of every rank's


def records_path(out_dir, rank):
    return os.path.join(out_dir, "records-rank%d.jsonl" % rank)


def stacks_path(out_dir, rank):
    return os.path.join(out_dir, "stacks-rank%d.txt" % rank)


# A record is bounded: a text longer than MAX_TEXT (a check's detail, an error's message
# or traceback: a probe or a user's model may raise one of megabytes) keeps its first
# MAX_TEXT characters, and its whole is spooled to a file beside the records, named in
# what is kept. Records travel through the launcher's store (worker/relay.py), whose
# values are bounded too, and end up in the report.
MAX_TEXT = 64 << 10
# Only records whose line is over this are looked into.
MAX_LINE = 4 * MAX_TEXT


def spool_dir(records_file):
    return records_file[:-len(".jsonl")] + ".spool" if records_file.endswith(".jsonl") \
        else records_file + ".spool"


class RecordWriter:
    """Writes a rank's records, each as one ``write``. A record that cannot be written
    (the disk full: a probe's checkpoint filled it) is kept and written before the next
    one, once there is room again (the probe's files removed): a check that failed for
    want of space is reported as such, not lost. A line cut short by the full disk is
    ended first, and read back as torn. A record's long texts are cut (``MAX_TEXT``)."""

    def __init__(self, path, rank):
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._path = path
        self._rank = rank
        self._pending = []
        self._cut = False  # a write may have left part of a line
        self._spooled = 0

    def _spool(self, kind, name, text):
        """``text`` cut to MAX_TEXT characters, and the whole of it in a file."""
        self._spooled += 1
        directory = spool_dir(self._path)
        path = os.path.join(directory, "%s-%d-%s.txt" % (kind, self._spooled, name))
        try:
            os.makedirs(directory, exist_ok=True)
            with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
                f.write(text)
            where = "the whole text: %s" % os.path.abspath(path)
        except OSError as exc:
            where = "the whole text could not be kept: %s" % (exc.strerror or exc)
        return "%s … [cut: %d more characters; %s]" % (
            text[:MAX_TEXT], len(text) - MAX_TEXT, where)

    def _bounded(self, kind, fields, prefix=""):
        for key, value in list(fields.items()):
            if isinstance(value, str) and len(value) > MAX_TEXT:
                fields[key] = self._spool(kind, prefix + key, value)
            elif isinstance(value, dict):
                fields[key] = self._bounded(kind, dict(value), prefix + key + ".")
        return fields

    def write(self, kind, **fields):
        fields["t"] = kind
        fields["rank"] = self._rank
        fields["time"] = time.time()
        line = json.dumps(fields, default=repr)
        if len(line) > MAX_LINE:
            line = json.dumps(self._bounded(kind, fields), default=repr)
        self._pending.append((line + "\n").encode("utf-8"))
        data = (b"\n" if self._cut else b"") + b"".join(self._pending)
        try:
            while data:
                data = data[os.write(self._fd, data):]
        except OSError as exc:
            self._cut = True
            if len(self._pending) > 1000:  # never room again: give up on the oldest
                del self._pending[0]
            try:  # stderr may be on the full disk too
                os.write(2, ("envcheck: cannot write a record (%s); it is kept for later\n"
                             % (exc.strerror or exc)).encode("utf-8", "replace"))
            except OSError:
                pass
            return
        self._pending, self._cut = [], False

    def close(self):
        os.close(self._fd)


def parse_line(line):
    """The record on one line, or None when the line is not a whole envcheck record."""
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("t"), str) \
            or not isinstance(rec.get("rank"), int):
        return None
    return rec


def parse(text):
    """(records, number of torn lines skipped) from the text of a record file."""
    records, torn = [], 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        rec = parse_line(line)
        if rec is None:
            torn += 1
        else:
            records.append(rec)
    return records, torn


class RecordTail:
    """Follows one rank's record file while the rank writes it (``tail -f``).

    A line without its newline yet waits for the rest; a complete line that is not a
    record is counted in ``torn`` and skipped.
    """

    def __init__(self, path):
        self.path = path
        self.torn = 0
        self._offset = 0
        self._pending = b""

    def poll(self):
        """The records completed since the last call."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except FileNotFoundError:
            return []
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        out = []
        for raw in lines:
            if not raw.strip():
                continue
            rec = parse_line(raw.decode("utf-8", "replace"))
            if rec is None:
                self.torn += 1
            else:
                out.append(rec)
        return out
