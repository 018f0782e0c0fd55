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
    """The soft limit ``name`` (``..._HARD``: the hard one), as text; None where unknown."""
    if resource is None:
        return None
    hard = name.endswith("_HARD")
    try:
        value = resource.getrlimit(getattr(resource, name[:-5] if hard else name))[hard]
    except (AttributeError, ValueError, OSError):
        return None
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


# What one rank of envcheck's checks opens at most (files, pipes, sockets): alone, or a
# base and, with gloo, a socket pair to every peer of each group. Measured with torch
# 2.13.0+cpu, gloo, envcheck's default checks, the run at ``ulimit -n`` N (soft and
# hard) on one host:
#   1 rank: fails at 24, passes at 28;  2 ranks: fail 40, pass 44;  3: fail 44, pass 52;
#   4: fail 48, pass 56;  8: fail 64, pass 72   (docs/safety.md).
# ``files_needed`` lies between each failing and each passing limit. With NCCL a rank
# holds a few sockets whatever the world size: the base and its host's ranks only
# (unverified on a GPU). Other probes than the default ones may need more.
FILES_ALONE = 28
FILES_BASE = 36
FILES_PER_RANK = 4
FILES_FIX = ("raise it: ulimit -n 65536 before the launcher (up to the hard limit; "
             "docker run --ulimit nofile=65536; LimitNOFILE= in a systemd unit; nofile "
             "in /etc/security/limits.conf)")


def files_needed(world_size, local_world_size, backend):
    """About how many open files one rank of this job needs at most."""
    peers = local_world_size if backend == "nccl" else world_size
    return FILES_ALONE if peers <= 1 else FILES_BASE + FILES_PER_RANK * peers


# Below this, envcheck run cannot start its ranks (measured: at 11 the zygote's import of
# torch fails with EMFILE, at 12 both ranks start and report setup.open_files).
START_FILES = 16


def too_few_to_start():
    """The open-file limit leaves envcheck run no room to start a rank."""
    soft = _limit("RLIMIT_NOFILE")
    return soft not in (None, "unlimited") and int(soft) < START_FILES


def open_files(world_size, local_world_size, backend, host):
    """(outcome, detail, advice, data) for this process's open-file limit."""
    soft = _limit("RLIMIT_NOFILE")
    hard = _limit("RLIMIT_NOFILE_HARD")
    need = files_needed(world_size, local_world_size, backend)
    data = {"soft": soft, "hard": hard, "needed": need}
    job = "a rank of this %d-rank %s job" % (world_size, backend)
    if soft is None:
        return "skipped", "the open-file limit cannot be read here", None, data
    if soft != "unlimited" and int(soft) < need:
        return ("failed", "ulimit -n is %s on %s; %s opens up to about %d files and "
                "sockets (with fewer, gloo fails with 'Too many open files', or a rank "
                "waits in init_process_group until its timeout)" % (soft, host, job, need),
                FILES_FIX, data)
    return "passed", "ulimit -n is %s on %s; %s needs about %d" % (soft, host, job, need), \
        None, data


# Threads count against ``ulimit -u`` as processes do: a rank has torch's thread pools,
# gloo's, the lifeline's. Fewer free than this per rank, and ranks cannot even start.
TASKS_PER_RANK = 16
TASKS_FIX = ("raise it (ulimit -u; nproc in /etc/security/limits.conf; TasksMax= or "
             "LimitNPROC= in a systemd unit; docker run --pids-limit), or run fewer ranks")


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


def _threads_here():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def processes(local_world_size, host, started=True):
    """(outcome, detail, advice, data) for ``ulimit -u`` and this host's ranks:
    ``started``, in a rank (each of them is running, with its first threads); else
    before any rank starts (envcheck run's supervisor). Root's real uid is exempt."""
    soft = _limit("RLIMIT_NPROC")
    data = {"soft": soft}
    if soft is None:
        return "skipped", "the limit on processes cannot be read here", None, data
    if soft == "unlimited" or os.getuid() == 0:
        return "passed", "ulimit -u is %s on %s%s" % (
            soft, host, " (root: not bound by it)" if os.getuid() == 0 else ""), None, data
    used = _tasks_of(os.getuid())
    # still to come: each local rank's threads (in a rank: beyond those it has now);
    # before the ranks, also the zygote and envcheck's own threads
    more = (TASKS_PER_RANK - (_threads_here() if started else 0)) * local_world_size
    need = max(0, more) + (0 if started else 4)
    data.update(used=used, needed=need)
    if int(soft) - used < need:
        return ("failed", "ulimit -u is %s on %s, and this user has %d processes and "
                "threads there already; %d rank(s) on this host need about %d more "
                "(each starts about %d threads)" % (soft, host, used, local_world_size,
                                                   need, TASKS_PER_RANK),
                TASKS_FIX, data)
    return "passed", "ulimit -u is %s on %s; %d in use, %d rank(s) need about %d more" % (
        soft, host, used, local_world_size, need), None, data


# The temporary directory, chosen as Python's tempfile chooses it (``gettempdir``: the
# first of TMPDIR, TEMP, TMP, /tmp, /var/tmp, /usr/tmp and the working directory in
# which a file can be created and written). torch takes it from there (torch.compile's
# caches, DCP's staging, elastic's log directories). Two things go unsaid there:
# - a TMPDIR that cannot be written (read-only, missing, full) is passed over in
#   silence: Python, and torch with it, write to the next candidate, while programs that
#   take TMPDIR as given fail ("mktemp: failed to create file via template
#   '$TMPDIR/tmp.XXXXXXXXXX': Read-only file system");
# - with no candidate left, tempfile raises "No usable temporary directory found".
# envcheck run gives its ranks a TMPDIR of its own, inside its run directory; the user's
# (unset: empty) travels to them in this variable, so that they judge the user's.
USER_TMPDIR = "ENVCHECK_USER_TMPDIR"
# What envcheck's own checks write there at most: checkpoint.async_snapshot's 4 MiB
# tensor (DCP: one copy) and a little more per rank (each rank's DCP files). Measured as
# the free space the check saw, with TMPDIR on a tmpfs of N KiB, ``envcheck run -p
# checkpoint``, torch 2.13.0+cpu, every checkpoint check passing or not (KiB free):
#   1 rank: fails 4216, passes 4248;  2: fails 4276, passes 4308;
#   4: fails 4436, passes 4464;       8: fails 4724, passes 4856.
# ``tmp_needed`` lies between each failing and each passing figure.
TMP_BASE = 4160 << 10
TMP_PER_RANK = 72 << 10


def tmp_needed(local_world_size):
    return TMP_BASE + TMP_PER_RANK * max(1, local_world_size)


TMP_FIX = ("point TMPDIR at a writable directory with room (export TMPDIR=/scratch/$USER; "
           "in a container, mount one), or unset it")


def temp_candidates(environ):
    """tempfile's candidates in its order, from the user's variables: (where, path)."""
    named = dict(environ)
    if USER_TMPDIR in environ:  # envcheck run: the user's own TMPDIR, or none
        named["TMPDIR"] = environ[USER_TMPDIR]
    out = [("%s=%s" % (v, named[v]), named[v]) for v in ("TMPDIR", "TEMP", "TMP")
           if named.get(v)]
    out += [(d, d) for d in ("/tmp", "/var/tmp", "/usr/tmp")]
    try:
        out.append(("the working directory %s" % os.getcwd(), os.getcwd()))
    except OSError:
        pass
    return out


def _unwritable(path):
    """None when a file can be created and written in ``path`` (tempfile's own test),
    else why not."""
    name = os.path.join(path, ".envcheck-tmp-%d-%s" % (os.getpid(), os.urandom(4).hex()))
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        os.write(fd, b"blat")
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(fd)
        try:
            os.unlink(name)
        except OSError:
            pass
    return None


def _mib(nbytes):
    if nbytes >= 1 << 30:
        return "%.1f GiB" % (nbytes / (1 << 30))
    return ("%.1f MiB" if nbytes < 10 << 20 else "%.0f MiB") % (nbytes / (1 << 20))


def tmpdir(environ, host, local_world_size=1):
    """(outcome, detail, advice, data) for the temporary directory the job's Python gets.
    A failure says in ``data["usable"]`` whether any directory is left (None: none)."""
    tried = []
    for where, path in temp_candidates(environ):
        why = _unwritable(os.path.abspath(path))
        if why is None:
            break
        tried.append((where, why))
    else:
        return ("failed", "no usable temporary directory on %s: %s: Python's tempfile "
                "raises 'No usable temporary directory found', and whatever writes a "
                "temporary file fails (torch.compile, checkpoint staging)" % (
                    host, "; ".join("%s: %s" % t for t in tried)), TMP_FIX,
                {"usable": None, "tried": [w for w, _ in tried]})
    path = os.path.abspath(path)
    try:
        st = os.statvfs(path)
        free = st.f_frsize * st.f_bavail
    except OSError:
        free = None
    need = tmp_needed(local_world_size)
    data = {"usable": path, "free": free, "needed": need,
            "tried": [w for w, _ in tried]}
    room = "" if free is None else " (%s free)" % _mib(free)
    if tried and tried[0][0].startswith("TMPDIR="):
        return ("failed", "%s on %s cannot be written (%s): Python's tempfile, and torch "
                "with it, silently use %s instead%s, and programs that take TMPDIR as "
                "given fail (mktemp)" % (tried[0][0], host, tried[0][1], path, room),
                TMP_FIX, data)
    if free is not None and free < need:
        return ("failed", "%s on %s has %s free: envcheck's checkpoint checks need about "
                "%s there with %d rank(s) on this host (measured), a job's checkpoints and "
                "caches far more" % (path, host, _mib(free), _mib(need), local_world_size),
                TMP_FIX, data)
    return "passed", "temporary files on %s go to %s%s" % (host, path, room), None, data


def os_error_line(exc):
    """What an OSError envcheck could not recover from says to the user, in one line."""
    what = exc.strerror or str(exc)
    where = " (%s)" % exc.filename if getattr(exc, "filename", None) else ""
    if exc.errno == errno.EAGAIN:
        return ("cannot start another process: the limit on processes is reached (ulimit -u "
                "is %s); envcheck needs one per rank and a few more: raise the limit or "
                "run fewer ranks (--nproc)" % _limit("RLIMIT_NPROC"))
    if exc.errno == errno.EMFILE:
        return ("too many open files: the open-file limit is reached (ulimit -n is %s): "
                "raise it (ulimit -n 65536)" % _limit("RLIMIT_NOFILE"))
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
