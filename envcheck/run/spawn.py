"""How the ranks of an attempt start: forked by a zygote that imported torch once.

Every rank used to be its own interpreter, importing torch itself: N times the CPU and,
on a shared filesystem, N times the metadata load, again for every attempt after a hang
or crash. Instead a zygote, the fork server (``launch/forkserver.py``, under the ranks'
interpreter, running ``worker/zygote.py``'s import), imports torch once per attempt,
forks the ranks, and exits once this process has every rank's PID (it closes its end of
their socket pair). This process is the ranks' *subreaper* (``PR_SET_CHILD_SUBREAPER``):
when the zygote exits they become its children, so their exit codes and signals are
read with ``waitpid`` exactly as for processes it started.

What the supervisor needs of a rank is the part of ``subprocess.Popen`` it uses
(``pid``, ``poll()``, ``returncode``): ``ForkedRank`` is that. Each forked rank is the
leader of its own session, as before, so killing its process group works unchanged.

When the zygote cannot do it (torch does not import under ``--python``, the zygote died
or outlived the startup timeout) the ranks start the usual way, one interpreter each,
and meet the same problem where the report already says it best. They start that way
too when ``--python`` is a script (``#!``), not an interpreter: a wrapper may do
something per rank (pin it with numactl, pick its GPU from ``$LOCAL_RANK``), so it must
run once per rank. ``ENVCHECK_ZYGOTE=0`` starts them that way always (to compare, or to
rule the zygote out).
"""

import array
import json
import os
import signal
import socket
import time
import uuid

from ..launch import contain, procs
from ..core.text import printable, shorten

# Every process a zygote forks carries its own id (a fork keeps the environment it was
# started with): what it forked can be found, and proven its, even when the zygote died
# before it said the PID.
ZYGOTE_ID = "ENVCHECK_ZYGOTE_ID"
# What the fork server runs first (the one import of torch) and before it forks (what the
# probes import lazily): worker/zygote.py, named, never imported on this side.
INIT = "envcheck.worker.zygote:import_torch"
PRELOAD = "envcheck.worker.zygote:preload"
HAND_OVER_S = 1.0  # how long poll() waits for a zygote that forked every rank to exit
# What each forked rank runs: a rank of envcheck run (``python -m envcheck.worker.rank``).
RANK_TARGET = "envcheck.worker.rank:main"


def wanted(environ=os.environ):
    return environ.get("ENVCHECK_ZYGOTE", "1") != "0"


def forkable(interpreter):
    """Is this an interpreter binary, not a wrapper script that must run per rank?"""
    try:
        with open(interpreter, "rb") as f:
            return f.read(2) != b"#!"
    except OSError:
        return False


class ForkedRank:
    """A rank the zygote forked; a child of this process once the zygote has exited."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Not ours to wait for (should not happen while we are its subreaper):
                # gone, with no code to report.
                self.returncode = 255
                return self.returncode
            if pid:
                self.returncode = procs.exit_code(status)
        return self.returncode


class Zygote:
    """A fork server (``launch/forkserver.py``) for one attempt, started at once and told
    later what to fork, over a socket pair: polled until it forked every rank."""

    def __init__(self, interpreter, env, out_dir, pass_fds):
        self.nproc = None  # known at go()
        self.started = time.time()  # when it began importing torch (the report's timing)
        self.stderr_path = os.path.join(out_dir, "stderr-zygote.txt")
        self.id = uuid.uuid4().hex
        self.env = dict(env, **{ZYGOTE_ID: self.id})
        ours, theirs = socket.socketpair()
        try:
            # Its stdout too: what a library prints as torch imports is no protocol.
            with open(self.stderr_path, "wb") as err:
                self.proc = procs.popen(
                    [interpreter, "-m", "envcheck.launch.forkserver", "--init", INIT,
                     "--preload", PRELOAD, "--resolve", RANK_TARGET,
                     "--parent", str(os.getpid()),
                     "--fd", str(theirs.fileno())],
                    env=self.env, stdin=procs.DEVNULL, stdout=err, stderr=err,
                    start_new_session=True, pass_fds=tuple(pass_fds) + (theirs.fileno(),))
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours
        self.pids = {}
        self.faults = []  # replies that are not its protocol: reported, not acted on
        self.ready = False  # torch imported: it forks at once when told to go
        self._pending = b""
        self._outbox = []  # [bytes, fds]: what it has not read yet (it may be importing)
        self._handed_over = False

    @staticmethod
    def _modules(probes):
        # All a preload reads of the probes (worker/runtime.preload): a few hundred bytes.
        modules = dict.fromkeys(m for p in probes for m in p.get("preload") or ())
        return [{"preload": list(modules)}]

    def _order(self, message, fds=()):
        """Queue a request (and the descriptors that go with it, duplicated: the caller
        closes its own), and send what the socket takes now."""
        self._outbox.append([json.dumps(message).encode() + b"\n",
                             [os.dup(fd) for fd in fds]])
        self._flush()

    def _flush(self):
        """Send what is queued, as far as the socket takes it without blocking: the
        server reads nothing while it imports torch."""
        while self._outbox and self.sock is not None:
            data, fds = self._outbox[0]
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] \
                if fds else []
            try:
                sent = self.sock.sendmsg([data], ancillary)
            except BlockingIOError:
                return
            except OSError:  # it died: poll() says so, the ranks start the usual way
                self._drop_outbox()
                return
            for fd in fds:  # sent with the first byte
                os.close(fd)
            self._outbox[0] = [data[sent:], []]
            if not self._outbox[0][0]:
                self._outbox.pop(0)

    def _drop_outbox(self):
        for _, fds in self._outbox:
            for fd in fds:
                os.close(fd)
        self._outbox = []

    def preload(self, probes):
        """Import what these probes import lazily, once torch is (a CPU build only)."""
        self._order({"preload": self._modules(probes)})

    def go(self, nproc, argv, probes, out_dir, env):
        """Fork the ranks as soon as torch is imported (at once when it is): ``nproc``
        ranks running ``envcheck.worker.rank`` with ``argv``, their output in ``out_dir``,
        ``env`` added to the environment the zygote was started with."""
        self.nproc = nproc
        self._order({"preload": self._modules(probes)})
        for rank in range(nproc):
            rank_env = dict(self.env, **env)
            rank_env.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
            out = os.open(os.path.join(out_dir, "stdout-rank%d.txt" % rank),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            err = os.open(os.path.join(out_dir, "stderr-rank%d.txt" % rank),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                self._order({"fork": {"id": rank, "target": RANK_TARGET, "args": [argv],
                                      "env": rank_env}}, (out, err))
            finally:
                os.close(out)
                os.close(err)

    def _read(self):
        if self.sock is None:
            return
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # it closed its end: it is exiting
            self._close_socket()
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > 4096:  # no reply is that long
            lines.append(self._pending)
            self._pending = b""
        for line in lines:
            self._line(line)

    def _line(self, line):
        """One reply, parsed strictly: ``ready``, or the PID of a rank of this attempt
        not yet reported, proven a process the zygote forked. Anything else is a fault
        to report, never a PID to kill."""
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if isinstance(reply, dict) and "ready" in reply:
            self.ready = True
            return
        if isinstance(reply, dict) and self.nproc is not None \
                and isinstance(reply.get("pid"), int) and isinstance(reply.get("id"), int):
            rank, pid = reply["id"], reply["pid"]
            if 0 <= rank < self.nproc and rank not in self.pids and self._forked_here(pid):
                self.pids[rank] = pid
                return
        if line.strip() and len(self.faults) < 5:
            self.faults.append("the zygote sent a reply that is not its protocol, "
                               "ignored: %s" % shorten(printable(
                                   line.decode("utf-8", "replace")), 120))

    def _forked_here(self, pid):
        """Is ``pid`` a process this zygote forked? Its parent is the zygote (or, once
        the zygote exited, this process, its subreaper) and it carries the zygote's id
        (a rank dead already has no environment to read: a zombie of those parents is
        theirs to reap, no other's)."""
        return pid > 1 and procs.parent_of(pid) in (self.proc.pid, os.getpid()) \
            and (procs.carries(pid, ZYGOTE_ID, self.id) or procs.is_zombie(pid))

    def poll(self):
        """None while it works; the ranks once it forked all and exited; False when it
        failed (any rank it forked is killed: the attempt starts its ranks anew)."""
        self._flush()
        self._read()
        if self.forked_all() and not self._handed_over:
            # Every rank is here: it may go (it exits once this end is closed), and
            # they become this process's children. It has nothing left to do: wait for
            # it now rather than a poll later (the ranks are tracked only then).
            self._handed_over = True
            self._close_socket()
            try:
                self.proc.wait(timeout=HAND_OVER_S)
            except procs.TimeoutExpired:
                pass
        code = self.proc.poll()
        if code is None:
            return None
        self._read()
        self._close_socket()
        if code == 0 and self.forked_all():
            return [ForkedRank(self.pids[r]) for r in range(self.nproc)]
        self._kill_forked()
        return False

    def forked_all(self):
        """Has it reported every rank it was told to fork?"""
        return self.nproc is not None and sorted(self.pids) == list(range(self.nproc))

    def end(self):
        """The ranks of a zygote that reported them all but has not exited yet: SIGKILL it
        alone (each rank is a session of its own), so that they are this process's
        children (its subreaper), as when it exits."""
        if self.proc.returncode is None:
            procs.send_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._close_socket()
        return [ForkedRank(self.pids[r]) for r in range(self.nproc)]

    def kill(self):
        """Stop it wherever it is (importing torch, forking): it and what it forked."""
        if self.proc.returncode is None:  # not reaped: its PID and group are still its own
            procs.send_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._read()
        self._close_socket()
        self._kill_forked()

    def _close_socket(self):
        self._drop_outbox()
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _kill_forked(self):
        """Kill whatever it forked, reported or not (it may have died between a fork and
        the line naming it): every process carrying its id, proven so as it is
        signalled, and wait until none is left, so that no rank of this fork can join
        the attempt started instead."""
        contain.kill_marked(self.id, name=ZYGOTE_ID)
        deadline = time.monotonic() + 5.0
        while contain.marked(self.id, name=ZYGOTE_ID) and time.monotonic() < deadline:
            time.sleep(0.01)
            contain.kill_marked(self.id, name=ZYGOTE_ID)
        for pid in self.pids.values():
            try:
                os.waitpid(pid, os.WNOHANG)  # proven ours when read: a child by now
            except ChildProcessError:
                pass
        self.pids = {}
