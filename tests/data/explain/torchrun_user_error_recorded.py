"""torchrun_user_error.py's job with its main under torch elastic's ``@record``: each
rank that raises writes its traceback to an error file (torch's error_handler.py), which
torchrun's --log-dir keeps as {log_dir}/{run_id}/attempt_0/{local_rank}/error.json.
Run by tests/test_explain_structure.py."""

import os
import sys

from torch.distributed.elastic.multiprocessing.errors import record

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchrun_user_error as job  # noqa: E402

if __name__ == "__main__":
    record(job.main)()
