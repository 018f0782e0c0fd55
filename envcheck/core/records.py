"""The record stream a rank writes for the supervisor.

One JSON object per line in ``records-rank{RANK}.jsonl``, flushed after every record so
that what a rank said before a SIGKILL or a segfault is still there to read. The record
types, in the order a rank writes them:

- ``hello``: the rank started and imported torch (``torch_import_s``).
- ``env``: what this rank sees of its environment (rank 0 collects the full picture).
- ``setup_start`` / ``setup``: init_process_group, with outcome, seconds and error.
- ``probe_start`` / ``check_start`` / ``check`` / ``probe_end``: one probe at a time.
- ``bye``: the rank finished its plan and destroyed its process group.

The supervisor reads these files while the ranks run (see ``envcheck.supervisor``).
"""

import json
import os
import time


def records_path(out_dir, rank):
    return os.path.join(out_dir, "records-rank%d.jsonl" % rank)


def stacks_path(out_dir, rank):
    return os.path.join(out_dir, "stacks-rank%d.txt" % rank)


class RecordWriter:
    def __init__(self, path, rank):
        self._f = open(path, "a", encoding="utf-8", buffering=1)
        self._rank = rank

    def write(self, kind, **fields):
        fields["t"] = kind
        fields["rank"] = self._rank
        fields["time"] = time.time()
        self._f.write(json.dumps(fields, default=repr) + "\n")
        self._f.flush()

    def close(self):
        self._f.close()
