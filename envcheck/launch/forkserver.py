"""The one fork server: import torch once, fork a rank on request.

``import torch`` is the longest thing a short run does, once per rank when each rank is
its own interpreter. A fork server (shaped like CPython's
``multiprocessing/forkserver.py``) pays it once: it runs an *init* target that imports
torch, then forks one process per request, and each fork becomes what the request
names. It serves:

- **``envcheck run``** (``run/spawn.py``): one server per attempt, connected to the
  supervisor by a socket pair (``--fd``). The run's first is its head start
  (``run/headstart.py``), started before the options are parsed; while a rank sits long
  in one phase, the next attempt's is started early (the spare). It forks the attempt's
  ranks and hands them over: once the supervisor has every PID it closes its end, the
  server exits, and the ranks become the supervisor's children (their subreaper).
- **each host under torchrun** (``worker/hostzygote.py``): local rank 0's process starts
  it, listening on an abstract socket (``--listen``); every local rank's process (its
  watcher) connects and asks for its rank. The server watches that fork and passes on
  its wait status; a fork whose watcher's connection closed is killed.

A request is one JSON line on the connection, with the fork's stdout and stderr passed
as file descriptors (``SCM_RIGHTS``)::

    {"preload": [plan entries]}         what the probes import lazily (``--preload``)
    {"fork": {"id": ..., "target": "module:function", "args": [...],
              "env": {...}, "cwd": ..., "argv": [...],   # the fork's own, whole
              "watch": bool,                             # status back, killed with us
              "cgroup": path,                            # the fork enters it first
              "require": {"python": ..., "affinity": [...], "env_except": [...]}}}

and each reply one JSON line: ``{"ready": import_s}`` once the init target ran,
``{"pid": N, "id": ...}`` per fork, ``{"refused": why, "id": ...}`` where the request's
``require`` does not hold (another interpreter, another environment, other CPUs: that
rank imports torch itself), ``{"status": S, "pid": N}`` when a watched fork ends. The
target is called as ``target(*args, forked={"zygote_pid", "torch_import_s"})``: nothing
is patched into a module after the fork (``launch/forked.py``).

A fork is its own session (the driver signals its process group), in the cgroup its
request names (``launch/enclosure.py``: its watcher's for it), its stdin /dev/null,
SIGUSR1 ignored until the rank registers its stack dump for it, and, when watched, dies
with the server (``PR_SET_PDEATHSIG``). The server dies with whoever started it while it
imports (a supervisor: always; a torchrun host: until it has forked), never outlives its
last connection, and forks nothing once its init target failed: the driver then starts
each rank the usual way, and they meet the problem where the report says it best.

stdlib only: the init and preload targets, named by the driver, import torch.
"""

import argparse
import array
import json
import os
import random
import select
import signal
import socket
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from . import contain, enclosure, forked, procs, signals

POLL_S = 0.02
MAX_LINE = 1 << 20  # no request is longer: a connection sending more is closed


# --- the wire: one JSON line, maybe with file descriptors -----------------------------

def send(sock: socket.socket, message: Dict[str, Any], fds: Tuple[int, ...] = ()) -> None:
    """One JSON line, with ``fds`` passed along (SCM_RIGHTS)."""
    data = json.dumps(message).encode() + b"\n"
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg([data], ancillary)
    if sent < len(data):
        sock.sendall(data[sent:])


def peer(sock: socket.socket) -> Tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid, uid, _ = array.array("i", creds)
    return pid, uid


class Conn:
    """One connection: what it sent so far, the descriptors that came with it, and the
    forks it asked to watch."""

    def __init__(self, sock: socket.socket, pid: Optional[int]) -> None:
        self.sock = sock
        self.pid = pid  # the client's (None: the socket pair's other end)
        self.buf = b""
        self.fds: List[int] = []
        self.watched: Dict[int, Any] = {}  # fork pid -> request id
        self.enclosed: Dict[int, Dict[str, Any]] = {}  # watched fork pid -> its request

    def receive(self) -> bool:
        """Read what it sent; False once it closed its end (or sent garbage)."""
        try:
            data, ancdata, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(16 * 4))
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[:len(payload) - len(payload) % 4])
                self.fds.extend(fds)
        self.buf += data
        return bool(data) and len(self.buf) <= MAX_LINE

    def reply(self, message: Dict[str, Any]) -> None:
        try:
            self.sock.setblocking(True)
            send(self.sock, message)
            self.sock.setblocking(False)
        except OSError:  # it went away: its forks follow (see Server._closed)
            pass

    def take_fds(self, n: int) -> List[int]:
        taken, self.fds = self.fds[:n], self.fds[n:]
        return taken

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.sock.close()


# --- the server -----------------------------------------------------------------------

class Server:
    """Forks on request, for the connections it has (and, listening, accepts)."""

    def __init__(self, preload_target: Optional[str]) -> None:
        self.preload_target = preload_target
        self.preloaded = False
        self.import_s: Optional[float] = None
        self.env = dict(os.environ)  # before the init target, which may add to it
        self.affinity = sorted(os.sched_getaffinity(0))
        self.conns: List[Conn] = []
        self.listener: Optional[socket.socket] = None
        self.accept_from: Optional[int] = None  # listening: the agent every client is a child of
        self.served = 0
        self.serve_limit: Optional[int] = None
        self.deadline: Optional[float] = None
        self.leader: Optional[int] = None

    # -- the one import, and what the probes import ------------------------------------
    def init(self, target: str) -> None:
        self.import_s = forked.resolve(target)()

    def resolve(self, targets: List[str]) -> None:
        """Import the modules of what the forks will run, once, here: each rank would
        otherwise import them after its fork (17 ms for envcheck's rank, 34 ms for a
        launched one, per rank, measured with torch imported). One that fails is left for
        the fork to meet and report."""
        for target in targets:
            try:
                forked.resolve(target)
            except Exception:  # noqa: BLE001 - the fork meets it again, and reports it
                pass

    def preload(self, probes: List[Dict[str, Any]]) -> None:
        if self.preloaded or not self.preload_target:
            return
        self.preloaded = True
        forked.resolve(self.preload_target)(probes)

    # -- connections ---------------------------------------------------------------------
    def listen(self, name: str, agent: int, leader: int, clients: int,
               seconds: float) -> None:
        """Listen on the abstract Unix socket ``name`` (per network namespace, gone with
        this process)."""
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0" + name)  # OSError: another server is there already
        self.listener.listen(64)
        self.accept_from, self.leader = agent, leader
        self.serve_limit, self.deadline = clients, time.monotonic() + seconds

    def adopt(self, fd: int) -> None:
        sock = socket.socket(fileno=fd)
        sock.setblocking(False)
        self.conns.append(Conn(sock, None))

    def _stop_listening(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def _accept(self) -> None:
        assert self.listener is not None
        sock, _ = self.listener.accept()
        pid, uid = peer(sock)
        if uid != os.getuid() or procs.parent_of(pid) != self.accept_from:
            sock.close()  # not one of this agent's ranks
            return
        sock.setblocking(False)
        self.conns.append(Conn(sock, pid))

    def _closed(self, conn: Conn) -> None:
        self.conns.remove(conn)
        for pid in conn.watched:  # its watcher is gone: so is its rank, and what it started
            procs.send(pid, signal.SIGKILL)
            spec = conn.enclosed.get(pid, {})
            enclosure.end_fork(spec.get("env") or {}, spec.get("cgroup"))
        if conn.pid is not None and conn.pid == self.leader:
            self._stop_listening()
        conn.close()

    # -- requests ------------------------------------------------------------------------
    def _handle(self, conn: Conn) -> None:
        while b"\n" in conn.buf:
            line, _, conn.buf = conn.buf.partition(b"\n")
            request = json.loads(line)
            if "preload" in request:
                self.preload(request["preload"])
            if "fork" in request:
                self._fork(conn, request["fork"])

    def _refusal(self, spec: Dict[str, Any], fds: List[int]) -> Optional[str]:
        """Why this server's fork would not be the rank the request describes."""
        require = spec.get("require") or {}
        if "python" in require and require["python"] != sys.executable:
            return "another interpreter"
        if "env_except" in require:
            skip = set(require["env_except"])
            env = spec.get("env") or {}
            differs = sorted(k for k in set(env) | set(self.env)
                             if k not in skip and env.get(k) != self.env.get(k))
            if differs:
                return "its environment differs: %s" % ", ".join(differs[:5])
        if "affinity" in require and require["affinity"] != self.affinity:
            # bound to CPUs of its own (torchrun --numa-binding, numactl): then maybe to
            # a NUMA node's memory too, which a fork of this process would not be
            return "its CPU affinity differs"
        if len(fds) != 2:
            return "no stdout and stderr came with the request"
        return None

    def _fork(self, conn: Conn, spec: Dict[str, Any]) -> None:
        fds = conn.take_fds(2)
        why = self._refusal(spec, fds)
        if why:
            for fd in fds:
                os.close(fd)
            conn.reply({"refused": why, "id": spec.get("id")})
            return
        self.served += 1
        pid = procs.fork()
        if pid == 0:
            self._become(conn, spec, fds)
        for fd in fds:
            os.close(fd)
        if spec.get("watch"):
            conn.watched[pid] = spec.get("id")
            conn.enclosed[pid] = spec
        conn.reply({"pid": pid, "id": spec.get("id")})

    def _become(self, conn: Conn, spec: Dict[str, Any], fds: List[int]) -> None:
        """In the fork: what the request names; never returns."""
        def become() -> Any:
            signals.reset(*signals.SIGNALS, signal.SIGCHLD)
            os.setsid()  # the driver signals the rank's process group
            enclosure.enter(spec.get("cgroup"))  # its watcher's cgroup for it, if any
            if spec.get("watch"):
                contain.die_with_parent(os.getppid())
            out, err = fds
            os.dup2(out, 1)
            os.dup2(err, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd in (null, out, err):
                os.close(fd)
            if self.listener is not None:
                self.listener.close()
            for other in self.conns:  # the server's, not this rank's
                for fd in other.fds:
                    os.close(fd)
                other.sock.close()
            if spec.get("cwd"):
                os.chdir(spec["cwd"])
            if spec.get("env") is not None:
                os.environ.clear()
                os.environ.update(spec["env"])
            if spec.get("argv"):
                sys.argv = list(spec["argv"])
            random.seed()  # not the server's sequence in every rank
            target = forked.resolve(spec["target"])
            return target(*spec.get("args", ()),
                          forked={"zygote_pid": os.getppid(), "torch_import_s": self.import_s})

        forked.run_forked(become)

    # -- the loop ------------------------------------------------------------------------
    def _reap(self) -> None:
        """Pass on the status of every watched fork that ended. Forks handed over (not
        watched) are not waited for here: their driver does, once this server is gone."""
        for conn in self.conns:
            for pid in list(conn.watched):
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done, status = pid, 0
                if done:
                    del conn.watched[pid]
                    conn.enclosed.pop(pid, None)
                    conn.reply({"status": status, "pid": pid})

    def _watching(self) -> bool:
        return any(conn.watched for conn in self.conns)

    def run(self) -> int:
        while True:
            if self.listener is not None and (
                    (self.serve_limit is not None and self.served >= self.serve_limit)
                    or (self.deadline is not None and time.monotonic() > self.deadline)
                    or (self.leader is not None and not procs.alive(self.leader))):
                self._stop_listening()
            if self.listener is None and not self.conns:
                return 0
            watched: List[Any] = [c.sock for c in self.conns]
            if self.listener is not None:
                watched.append(self.listener)
            ready, _, _ = select.select(watched, [], [], POLL_S)
            for sock in ready:
                if sock is self.listener:
                    self._accept()
                    continue
                conn = next(c for c in self.conns if c.sock is sock)
                if not conn.receive():
                    self._closed(conn)
                else:
                    self._handle(conn)
            self._reap()


def _args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m envcheck.launch.forkserver")
    p.add_argument("--init", required=True, metavar="MODULE:FUNCTION",
                   help="run once, first: imports torch, returns the seconds it took")
    p.add_argument("--preload", metavar="MODULE:FUNCTION",
                   help="called with the probes' plan entries, once, before a fork")
    p.add_argument("--probes", metavar="JSON", help="preload these at once")
    p.add_argument("--resolve", action="append", default=[], metavar="MODULE:FUNCTION",
                   help="what the forks will run (repeatable): imported after --init, so "
                        "that every fork shares the import instead of making its own")
    p.add_argument("--parent", type=int, metavar="PID",
                   help="die with this process while importing (and after: --fd)")
    p.add_argument("--fd", type=int, help="serve the socket pair's end at this descriptor")
    p.add_argument("--listen", metavar="NAME", help="serve the abstract Unix socket NAME")
    p.add_argument("--agent", type=int, help="listening: every client is its child")
    p.add_argument("--clients", type=int, help="listening: stop after this many forks")
    p.add_argument("--seconds", type=float, help="listening: stop after this long")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = _args(sys.argv[1:] if argv is None else argv)
    # A fork inherits SIGUSR1's disposition until the rank registers its stack dump for
    # it: a request for its stacks that comes first must not kill it.
    signals.ignore(signal.SIGUSR1)
    if args.listen:
        # The watchers pass the launcher's SIGTERM on to their ranks, and still need
        # this server for their statuses. What a fork orphans comes here (not to
        # local rank 0's watcher, whose own rank may end first), and ends with it.
        signals.ignore(*signals.SIGNALS)
        contain.set_subreaper(True)
    if args.parent:
        contain.die_with_parent(args.parent)
    server = Server(args.preload)
    if args.fd is not None:
        server.adopt(args.fd)
    if args.listen:
        try:
            server.listen(args.listen, args.agent, args.parent, args.clients, args.seconds)
        except OSError:
            return 0  # another is there already (a second start): its clients are served
    try:
        server.init(args.init)
        server.resolve(args.resolve)
        if args.probes:
            server.preload(json.loads(args.probes))
    except BaseException:  # noqa: B036 - torch does not import here: forks nothing
        if args.fd is not None:
            raise  # its traceback on stderr; the supervisor starts each rank itself
        return 0
    for conn in server.conns:
        conn.reply({"ready": server.import_s})
    if args.listen:
        # Once it has forked ranks it must outlive local rank 0's process: the other
        # ranks may still be finishing, and their watchers wait for their statuses.
        contain.outlive_parent()
        if not procs.alive(args.parent):
            return 0  # it ended as the prctl was undone
        code = server.run()
        contain.kill_descendants()  # what its forks left: every fork has ended
        return code
    return server.run()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # torch's atexit hooks are the ranks' business, not the server's
