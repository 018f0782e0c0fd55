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

import hashlib
import json
import os
import signal
import socket
import sys
import time

from ..launch import contain, enclosure, forkserver, procs
from . import zygote

OFF_ENV = "ENVCHECK_SHARED_IMPORT"
CONNECT_S = 5.0  # how long a local rank's process looks for the zygote before it forks
POLL_S = 0.02
# What torchrun sets differently for each local rank: anything else that differs means
# another environment, whose rank imports torch itself.
PER_RANK = frozenset(("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK",
                      "TORCHELASTIC_ERROR_FILE", enclosure.MARK))
KILLED = signal.SIGKILL  # the wait status of a fork that died with the zygote


def wanted(launcher, local_world_size, environ=os.environ):
    return (launcher == "torchrun" and local_world_size > 1
            and environ.get(OFF_ENV, "1") != "0")


def address(agent, environ=os.environ):
    """The zygote's socket (abstract: per network namespace, gone with its owner): one
    per torchrun agent (the parent of every local rank's process) and restart."""
    return "\0" + name(agent, environ)


def name(agent, environ=os.environ):
    """``address`` without its leading NUL: what the fork server is told to listen on."""
    key = "%s/%s/%d" % (environ.get("TORCHELASTIC_RUN_ID"),
                        environ.get("TORCHELASTIC_RESTART_COUNT"), agent)
    return "envcheck-zygote-%s" % hashlib.sha1(key.encode()).hexdigest()[:16]


# --- the watcher's side ----------------------------------------------------------------

# What the host's fork server runs in the rank it forks for a watcher (``launched.py``).
RANK_TARGET = "envcheck.worker.launched:run_forked"

def start(probes, local_world_size, startup_timeout):
    """Local rank 0's process: the host's fork server, started now (its import of torch
    begins while this process goes on), to preload what ``probes`` (plan entries)
    import. Where it cannot start, no rank finds it: each forks itself."""
    cmd = [sys.executable, "-m", "envcheck.launch.forkserver", "--init", zygote.INIT,
           "--preload", zygote.PRELOAD, "--resolve", RANK_TARGET,
           "--probes", json.dumps(probes),
           "--listen", name(os.getppid()), "--agent", str(os.getppid()),
           "--parent", str(os.getpid()), "--clients", str(local_world_size),
           "--seconds", repr(float(startup_timeout))]
    parent = os.getpid()
    try:
        # Not a session of its own: torchrun kills local rank 0's process group at its
        # teardown, and the zygote with it. It dies with this process from before its
        # exec (the prctl survives it): stopped early in its life (SIGSTOP), before its
        # own code could say so, it would otherwise outlive the job in state T.
        return procs.popen(cmd, stdin=procs.DEVNULL, stdout=procs.DEVNULL,
                           preexec_fn=lambda: contain.die_with_parent(parent)).pid
    except OSError:
        return None


def _replies(sock, buf):
    """The next reply on the server's connection (a dict), and what is left of ``buf``;
    None for the reply once the server is gone. Raises BlockingIOError when none is
    there yet on a non-blocking socket."""
    while b"\n" not in buf:
        try:
            chunk = sock.recv(256)
        except BlockingIOError:
            raise
        except OSError:
            chunk = b""
        if not chunk:
            return None, b""
        buf += chunk
    line, _, buf = buf.partition(b"\n")
    try:
        reply = json.loads(line)
    except ValueError:
        reply = {}
    return (reply if isinstance(reply, dict) else {}), buf


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
        while True:
            try:
                reply, self._buf = _replies(self.sock, self._buf)
            except BlockingIOError:
                return None
            if reply is None:  # the zygote is gone, and its forks with it
                return KILLED
            if reply.get("pid") == self.pid and isinstance(reply.get("status"), int):
                return reply["status"]


def _trusted_server(sock):
    """The zygote of this process's own agent: local rank 0's child, same user."""
    pid, uid = forkserver.peer(sock)
    leader = procs.parent_of(pid) or 0
    return uid == os.getuid() and procs.parent_of(leader) == os.getppid(), pid


def ask(target, argv, started, reply_s, environ=os.environ, connect_s=CONNECT_S,
        cgroup=None):
    """This rank, forked by the host's zygote to run ``target(argv, started, forked=...)``
    (``module:function``) with ``environ``, in ``cgroup`` (its enclosure's, or None):
    a Fork, or None (fork it yourself). The
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
        request = {"fork": {
            "id": 0, "target": target, "args": [list(argv), started], "env": dict(environ),
            "cwd": os.getcwd(), "argv": sys.argv, "watch": True, "cgroup": cgroup,
            "require": {"python": sys.executable, "env_except": sorted(PER_RANK),
                        "affinity": sorted(os.sched_getaffinity(0))}}}
        forkserver.send(sock, request, (1, 2))
        sock.settimeout(reply_s)
        buf = b""
        while True:
            reply, buf = _replies(sock, buf)
            if reply is None:
                raise OSError("the zygote ended")
            if "refused" in reply:
                raise OSError(reply["refused"])
            if isinstance(reply.get("pid"), int):
                break
        sock.settimeout(None)
        return Fork(sock, reply["pid"], zygote_pid, buf)
    except (OSError, ValueError):
        sock.close()
        return None
