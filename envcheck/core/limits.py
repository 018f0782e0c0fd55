"""The environment envcheck may be started in, and the limits it meets there, said in one line.

envcheck runs on the nodes people suspect are broken. What it meets there is an answer
to give, never a traceback:

- **Closed standard streams.** Started with stdin, stdout or stderr closed (``<&-``,
  a daemon manager), the next file or pipe envcheck opens would take fd 0, 1 or 2:
  a rank's lifeline pipe on fd 0 is then replaced by /dev/null in the rank and reads end
  of file at once, and every rank ends the run. ``ensure_std_fds`` opens /dev/null on
  each closed one first.
- **Inputs that are not files.** A FIFO or a device named like an answer file would
  block a reader forever, or never end: ``read_input`` opens without blocking, reads
  regular files only, and at most a bounded size.
- **Resource limits.** A process limit (``ulimit -u``) makes ``fork`` fail with EAGAIN;
  too few file descriptors (``ulimit -n``) make ``open`` and ``pipe`` fail with EMFILE;
  a full disk gives ENOSPC. ``os_error_line`` names the limit and its value.
"""

import errno
import os
import stat
import sys

try:
    import resource
except ImportError:  # pragma: no cover - not on Linux
    resource = None  # type: ignore[assignment]


def ensure_std_fds():
    """Open /dev/null on fd 0, 1 and 2 where they are closed (and give Python a stream
    for each), so that no file or pipe envcheck opens later lands on them."""
    for fd, name, mode in ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY),
                           (2, "stderr", os.O_WRONLY)):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, mode)
        except OSError:
            continue
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False,
                                    encoding="utf-8", errors="backslashreplace"))


def _limit(name):
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(getattr(resource, name))
    except (AttributeError, ValueError, OSError):
        return None
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


# Below this many open files a rank cannot even set up torch.distributed (its store,
# a socket per peer, its record and output files): refused before any rank starts.
MIN_OPEN_FILES = 64


def check_open_files():
    """A one-line reason when the open-file limit is too low for any run, else None."""
    soft = _limit("RLIMIT_NOFILE")
    if soft is None or soft == "unlimited" or int(soft) >= MIN_OPEN_FILES:
        return None
    return ("the open-file limit is too low (ulimit -n is %s); envcheck and "
            "torch.distributed need at least %d per process: raise it (ulimit -n 1024)"
            % (soft, MIN_OPEN_FILES))


# Threads count against ``ulimit -u`` as processes do: a rank has torch's thread pools,
# gloo's, the lifeline's. Fewer free than this per rank, and ranks cannot even start.
TASKS_PER_RANK = 16


def _tasks_of(uid):
    """How many processes and threads this real uid has now."""
    count = 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0
    for pid in pids:
        try:
            with open("/proc/%s/status" % pid, encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return count


def check_processes(nproc):
    """A one-line reason when ``ulimit -u`` leaves too few processes for ``nproc``
    ranks, else None. (Root's real uid is exempt from the limit.)"""
    soft = _limit("RLIMIT_NPROC")
    if soft is None or soft == "unlimited" or os.getuid() == 0:
        return None
    used = _tasks_of(os.getuid())
    needed = TASKS_PER_RANK * nproc + 4  # the zygote and envcheck's own threads
    if int(soft) - used >= needed:
        return None
    return ("the limit on processes is too low (ulimit -u is %s, and this user has %d "
            "processes and threads already); %d ranks need about %d more: raise it, or "
            "run fewer ranks (--nproc)" % (soft, used, nproc, needed))


def os_error_line(exc):
    """What an OSError envcheck could not recover from says to the user, in one line."""
    what = exc.strerror or str(exc)
    where = " (%s)" % exc.filename if getattr(exc, "filename", None) else ""
    if exc.errno == errno.EAGAIN:
        return ("cannot start another process: the limit on processes is reached (ulimit -u "
                "is %s); envcheck needs one per rank and a few more: raise the limit or "
                "run fewer ranks (--nproc)" % _limit("RLIMIT_NPROC"))
    if exc.errno == errno.EMFILE:
        return "too many open files: %s" % (check_open_files() or (
            "the open-file limit is reached (ulimit -n is %s): raise it (ulimit -n 1024)"
            % _limit("RLIMIT_NOFILE")))
    if exc.errno == errno.ENFILE:
        return "too many open files on this machine (the system-wide limit, fs.file-max)"
    if exc.errno == errno.ENOMEM:
        return "out of memory%s: %s (ulimit -v is %s)" % (where, what, _limit("RLIMIT_AS"))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no space left%s: %s: free some, or point TMPDIR elsewhere" % (where, what)
    if exc.errno == errno.EFBIG:
        return "a file grew past the file size limit%s (ulimit -f is %s)" % (
            where, _limit("RLIMIT_FSIZE"))
    return "%s%s" % (what, where)


# An answer, a report or a requirements file is kilobytes; past this it is not one.
MAX_INPUT_BYTES = 64 << 20


class InputError(ValueError):
    """An input that is not a regular file, or too large to be what it claims."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def read_input(path, limit=MAX_INPUT_BYTES):
    """The bytes of the regular file ``path``, at most ``limit`` of them. InputError for
    anything else (checked on the file opened, without blocking on a FIFO); OSError as
    ``open`` raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise InputError("%s, not a file" % kind)
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InputError("larger than %d MiB: not what envcheck reads" % (limit >> 20))
        return b"".join(chunks)
    finally:
        os.close(fd)
