"""The record stream a rank writes, and the one way to read it back.

One JSON object per line in ``records-rank{RANK}.jsonl``, flushed after every record so
that what a rank said before a SIGKILL or a segfault is still there to read. The record
types, in the order a rank writes them:

- ``hello``: the rank started and imported torch (``torch_import_s``).
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


class RecordWriter:
    """Writes a rank's records, each as one ``write``. A record that cannot be written
    (the disk full: a probe's checkpoint filled it) is kept and written before the next
    one, once there is room again (the probe's files removed): a check that failed for
    want of space is reported as such, not lost. A line cut short by the full disk is
    ended first, and read back as torn."""

    def __init__(self, path, rank):
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._rank = rank
        self._pending = []
        self._cut = False  # a write may have left part of a line

    def write(self, kind, **fields):
        fields["t"] = kind
        fields["rank"] = self._rank
        fields["time"] = time.time()
        self._pending.append((json.dumps(fields, default=repr) + "\n").encode("utf-8"))
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
