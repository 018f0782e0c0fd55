"""Write a whole file or nothing: a temporary file beside it, fsync, then rename.

Reports (JSON, JUnit) and launcher mode's gathered records go through here, so a run
killed while writing never leaves a half file where CI expects a report.
"""

import os
import tempfile


def write_atomic(path, data):
    """Write ``data`` (str as UTF-8, or bytes) to ``path`` atomically."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".envcheck-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
