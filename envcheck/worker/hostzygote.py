"""Launcher mode under torchrun: one ``import torch`` per host, not one per rank.

torchrun starts each local rank as its own ``python -m envcheck.worker.launched``, and
each would import torch and, on a CPU build, what the probes import lazily (torch._dynamo
for DDP, DCP): 2-3 s of CPU per rank, on a node of 8 ranks 8 times over, while the ranks
of every host wait for the slowest. So local rank 0's process starts this *host zygote*,
which imports them once, and every local rank's process (its watcher, ``launched.py``)
asks it for its rank. The zygote forks it, and the fork becomes that rank with that
process's arguments, environment, working directory, stdout and stderr (the last two
passed over the socket), as ``envcheck run``'s zygote forks its ranks (``zygote.py``).
The watcher watches it as it watches a rank it forked itself; the rank's exit status
comes back over the socket.

Only where that is the same rank as one that imported torch itself:

- torchrun only. Its local ranks are children of one agent, in its cgroup, with one
  environment but for the per-rank variables. Under srun each task may have a cgroup of
  its own (its GPUs, its CPUs), so there every task imports torch itself.
- A rank whose environment differs from local rank 0's in any other variable imports
  torch itself (torch reads some of them as it imports), and so does one bound to other
  CPUs (``--numa-binding``, numactl: maybe to a NUMA node's memory too).
- On a CUDA build the zygote imports torch only, as envcheck run's does: no CUDA call
  before the fork.

Whatever goes wrong (no zygote within ``CONNECT_S``, a refusal, no fork within the
startup timeout, the zygote ends before it forked), the watcher forks the rank itself, as
it did before this existed.
``ENVCHECK_SHARED_IMPORT=0`` turns it off.

Nothing outlives the job: the zygote is in local rank 0's process group, which torchrun
kills at its teardown; a fork dies with the zygote (``PR_SET_PDEATHSIG``); the zygote
SIGKILLs a fork whose watcher is gone (its connection closed), stops listening once every
local rank has asked or local rank 0's process is gone, and exits when no connection and
no fork is left. It ignores SIGTERM: the watchers stop their own ranks on torchrun's
teardown, and it still has their exit statuses to pass on.

stdlib and torch only, like the rest of ``worker/``.
"""

import array
import hashlib
import json
import os
import random
import select
import signal
import socket
import sys
import time

from ..launch import contain, forked, procs, signals

OFF_ENV = "ENVCHECK_SHARED_IMPORT"
CONNECT_S = 5.0  # how long a local rank's process looks for the zygote before it forks
POLL_S = 0.02
# What torchrun sets differently for each local rank: anything else that differs means
# another environment, whose rank imports torch itself.
PER_RANK = frozenset(("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK",
                      "TORCHELASTIC_ERROR_FILE"))
KILLED = signal.SIGKILL  # the wait status of a fork that died with the zygote


def wanted(launcher, local_world_size, environ=os.environ):
    return (launcher == "torchrun" and local_world_size > 1
            and environ.get(OFF_ENV, "1") != "0")


def address(agent, environ=os.environ):
    """The zygote's socket (abstract: per network namespace, gone with its owner): one
    per torchrun agent (the parent of every local rank's process) and restart."""
    key = "%s/%s/%d" % (environ.get("TORCHELASTIC_RUN_ID"),
                        environ.get("TORCHELASTIC_RESTART_COUNT"), agent)
    return "\0envcheck-zygote-%s" % hashlib.sha1(key.encode()).hexdigest()[:16]


def _peer(sock):
    """(pid, uid) of the process at the other end of a Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid, uid, _ = array.array("i", creds)
    return pid, uid


# --- the watcher's side ----------------------------------------------------------------

def start(probes, local_world_size, startup_timeout):
    """Local rank 0's process: the zygote, started now (its import of torch begins while
    this process goes on), to preload what ``probes`` (plan entries) import. Where it
    cannot start, no rank finds it: each forks itself."""
    cmd = [sys.executable, "-m", "envcheck.worker.hostzygote", str(local_world_size),
           str(os.getppid()), str(os.getpid()), repr(float(startup_timeout)),
           json.dumps(probes)]
    try:
        # Not a session of its own: torchrun kills local rank 0's process group at its
        # teardown, and the zygote with it.
        procs.popen(cmd, stdin=procs.DEVNULL, stdout=procs.DEVNULL)
    except OSError:
        pass


class Fork:
    """A rank the zygote forked for this process: its pid, and its wait status."""

    def __init__(self, sock, pid, zygote_pid, pending=b""):
        self.sock = sock
        self.pid = pid
        self.zygote_pid = zygote_pid
        self._buf = pending  # what came after the pid: its status, if it ended at once

    def status(self, block=False):
        """The rank's wait status once it has ended, else None (``block``: wait)."""
        self.sock.setblocking(block)
        while b"\n" not in self._buf:
            try:
                chunk = self.sock.recv(256)
            except BlockingIOError:
                return None
            except OSError:
                chunk = b""
            if not chunk:  # the zygote is gone, and its forks with it
                return KILLED
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        word, _, value = line.decode().partition(" ")
        return int(value) if word == "status" else KILLED


def _send(sock, data, fds=()):
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg([data], ancillary)
    if sent < len(data):
        sock.sendall(data[sent:])


def _trusted_server(sock):
    """The zygote of this process's own agent: local rank 0's child, same user."""
    pid, uid = _peer(sock)
    leader = procs.parent_of(pid) or 0
    return uid == os.getuid() and procs.parent_of(leader) == os.getppid(), pid


def ask(target, argv, started, reply_s, environ=os.environ, connect_s=CONNECT_S):
    """This rank, forked by the host's zygote to run ``target(argv, started, forked=...)``
    (``module:function``): a Fork, or None (fork it yourself). The
    zygote imports torch before it forks: its reply may take up to ``reply_s`` (the
    startup timeout); past it the rank is forked by its watcher, and imports torch
    itself."""
    deadline = time.monotonic() + connect_s
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        while True:
            try:
                sock.connect(address(os.getppid(), environ))
                break
            except (ConnectionRefusedError, FileNotFoundError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(POLL_S)
        trusted, zygote_pid = _trusted_server(sock)
        if not trusted:
            raise OSError("not our zygote")
        request = {"target": target, "argv": list(argv), "sys_argv": sys.argv, "env": dict(environ),
                   "cwd": os.getcwd(), "python": sys.executable, "started": started,
                   "affinity": sorted(os.sched_getaffinity(0))}
        _send(sock, json.dumps(request).encode() + b"\n", (1, 2))
        reply = b""
        sock.settimeout(reply_s)
        while b"\n" not in reply:
            chunk = sock.recv(256)
            if not chunk:
                raise OSError("the zygote ended")
            reply += chunk
        line, _, rest = reply.partition(b"\n")
        word, _, value = line.decode().partition(" ")
        if word != "pid":
            raise OSError(value)
        sock.settimeout(None)
        return Fork(sock, int(value), zygote_pid, rest)
    except (OSError, ValueError):
        sock.close()
        return None


# --- the zygote ------------------------------------------------------------------------

class _Client:
    def __init__(self, sock, pid):
        self.sock = sock
        self.pid = pid  # the watcher's
        self.buf = b""
        self.fds = []
        self.fork = None  # the rank's pid, once forked

    def close(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.sock.close()


def _recv(client):
    """Read what the client sent; False once it has closed its end."""
    try:
        data, ancdata, _, _ = client.sock.recvmsg(65536, socket.CMSG_SPACE(2 * 4))
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(payload[:len(payload) - len(payload) % 4])
            client.fds.extend(fds)
    client.buf += data
    return bool(data)


def _differs(env, own):
    """The variables, other than torchrun's per-rank ones, that differ from ours."""
    return sorted(k for k in set(env) | set(own) if k not in PER_RANK
                  and env.get(k) != own.get(k))


class Zygote:
    def __init__(self, local_world_size, agent, leader, startup_timeout, probes):
        self.local_world_size = local_world_size
        self.agent = agent  # torchrun's agent: every local rank's process is its child
        self.leader = leader  # local rank 0's process, which started this
        self.deadline = time.monotonic() + startup_timeout
        self.probes = probes  # plan entries: what the ranks will import, preloaded
        self.env = dict(os.environ)  # before torch's import, which may add to it
        self.affinity = sorted(os.sched_getaffinity(0))
        self.listener = None
        self.clients = []
        self.served = 0
        self.import_s = None

    def bind(self):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(address(self.agent, self.env))
        self.listener.listen(64)

    def prepare(self):
        """Import torch, and on a CPU build what the probes will import."""
        t0 = time.monotonic()
        import torch

        self.import_s = round(time.monotonic() - t0, 3)
        if not (torch.version.cuda or getattr(torch.version, "hip", None)):
            from . import runtime

            runtime.preload(self.probes)

    def _stop_listening(self):
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def _accept(self):
        sock, _ = self.listener.accept()
        pid, uid = _peer(sock)
        if uid != os.getuid() or procs.parent_of(pid) != self.agent:
            sock.close()  # not one of this agent's ranks
            return
        sock.setblocking(False)
        self.clients.append(_Client(sock, pid))

    def _serve(self, client):
        line, _, client.buf = client.buf.partition(b"\n")
        request = json.loads(line)
        differs = _differs(request["env"], self.env)
        why = None
        if request["python"] != sys.executable:
            why = "another interpreter"
        elif differs:
            why = "its environment differs: %s" % ", ".join(differs[:5])
        elif request["affinity"] != self.affinity:
            # bound to CPUs of its own (torchrun --numa-binding, numactl): then maybe to
            # a NUMA node's memory too, which a fork of this process would not be
            why = "its CPU affinity differs"
        elif len(client.fds) != 2:
            why = "no stdout and stderr came with the request"
        if why:
            client.sock.setblocking(True)
            client.sock.sendall(("refused %s\n" % why).encode())
            client.sock.setblocking(False)
            return
        self.served += 1
        pid = procs.fork()
        if pid == 0:
            self._become(client, request)
        for fd in client.fds:
            os.close(fd)
        client.fds = []
        client.fork = pid
        client.sock.setblocking(True)
        client.sock.sendall(b"pid %d\n" % pid)
        client.sock.setblocking(False)

    def _become(self, client, request):
        """In the fork: the rank its watcher asked for; never returns."""
        def become():
            signals.reset(*signals.SIGNALS, signal.SIGCHLD)
            os.setsid()  # as a rank the watcher forks: the watcher passes torchrun's
            # SIGTERM on, and its group's SIGKILL ends the watcher, then this (_closed)
            contain.die_with_parent(os.getppid())
            out, err = client.fds
            os.dup2(out, 1)
            os.dup2(err, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd in [null, out, err]:
                os.close(fd)
            if self.listener is not None:
                self.listener.close()
            for other in self.clients:
                if other is not client:  # another rank's stdout, stderr: not this one's
                    for fd in other.fds:
                        os.close(fd)
                other.sock.close()  # the zygote's, not this rank's
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = request["sys_argv"]
            random.seed()  # not the zygote's sequence in every rank

            target = forked.resolve(request["target"])
            return target(request["argv"], request["started"],
                          forked={"zygote_pid": os.getppid(), "torch_import_s": self.import_s})

        forked.run_forked(become)

    def _reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for client in self.clients:
                if client.fork == pid:
                    client.fork = None
                    try:
                        client.sock.setblocking(True)
                        client.sock.sendall(b"status %d\n" % status)
                    except OSError:
                        pass

    def _closed(self, client):
        self.clients.remove(client)
        if client.fork is not None:  # its watcher is gone: so is its rank
            procs.send(client.fork, signal.SIGKILL)
        if client.pid == self.leader:
            self._stop_listening()
        client.close()

    def _forks_alive(self):
        return any(c.fork is not None for c in self.clients)

    def run(self):
        while True:
            if self.listener is not None and (
                    self.served >= self.local_world_size or time.monotonic() > self.deadline
                    or not procs.alive(self.leader)):
                self._stop_listening()
            if self.listener is None and not self.clients:
                return 0
            watched = [c.sock for c in self.clients]
            if self.listener is not None:
                watched.append(self.listener)
            ready, _, _ = select.select(watched, [], [], POLL_S)
            for sock in ready:
                if sock is self.listener:
                    self._accept()
                    continue
                client = next(c for c in self.clients if c.sock is sock)
                if not _recv(client):
                    self._closed(client)
                elif b"\n" in client.buf and client.fork is None:
                    self._serve(client)
            self._reap()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    local_world_size, agent, leader, startup_timeout = argv[:4]
    # Its forks inherit SIGUSR1's until they register faulthandler for it: a watcher's
    # SIGUSR1 (dump your stacks) that comes before must not kill the rank.
    signals.ignore(*signals.SIGNALS, signal.SIGUSR1)
    zygote = Zygote(int(local_world_size), int(agent), int(leader), float(startup_timeout),
                    json.loads(argv[4]))
    # While it imports, it dies with local rank 0's process (a job that failed at once
    # must not wait for an import); once it has forked ranks, it must outlive it: the
    # other ranks may still be finishing, and their watchers wait for their statuses.
    contain.die_with_parent(int(leader))
    try:
        zygote.bind()
    except OSError:
        return 0  # another is there already (a second start): its clients are served
    try:
        zygote.prepare()
    except BaseException:
        # torch does not import here: each rank imports it itself and reports that
        return 0
    contain.outlive_parent()
    if not procs.alive(zygote.leader):
        return 0  # it ended as the prctl was undone
    return zygote.run()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # torch's atexit hooks are the ranks' business, not the zygote's
