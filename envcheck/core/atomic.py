"""Write a whole file or nothing: a temporary file beside it, fsync, then rename.

Reports (JSON, JUnit) and launcher mode's gathered records go through here, so a run
killed while writing never leaves a half file where CI expects a report.
"""

import os
import tempfile


def _umask():
    """The process's umask, read without changing it where Linux says it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _mode(path):
    """The mode the file gets: the one it has, else what open() would give it (0666 less
    the umask), not mkstemp's 0600, so a folder shared by a cluster's nodes reads it."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def write_atomic(path, data):
    """Write ``data`` (str as UTF-8, or bytes) to ``path`` atomically."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".envcheck-", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, _mode(path))
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
