"""Start the ranks, watch their record streams, and always come back with an answer.

Shaped like torch elastic's process context: deadlines on a monotonic clock, SIGTERM
then SIGKILL to each rank's whole process group, results keyed by rank, and the
*earliest* failure as the root cause (ranks stuck after a peer died are consequences).

One *attempt* starts ``nproc`` fresh ranks for a list of probes. It ends when every rank
said ``bye``, or is aborted:

- ``hang``: a rank spent longer than the timeout in one phase (startup, setup or a
  probe). Every rank is asked for its Python stacks (SIGUSR1, see the worker) before
  they are killed.
- ``crash``: a rank exited without saying ``bye``; exit code or signal and the tail of
  its stderr are kept.
- ``interrupted``: SIGINT or SIGTERM reached envcheck.

After a hang or crash inside a probe, a new attempt runs the probes that were left.
"""

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from ..core.records import records_path, stacks_path

# The worker's exit codes after a failed init_process_group and after a failed final
# barrier (see envcheck.worker.runtime).
EXIT_SETUP_FAILED = 3
EXIT_TEARDOWN_FAILED = 4
POLL_S = 0.02
STACK_WAIT_S = 1.0
TERM_GRACE_S = 2.0
STDERR_TAIL_BYTES = 4000
PORT_RETRIES = 3


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclasses.dataclass
class RankState:
    rank: int
    proc: subprocess.Popen
    records: list
    phase: str = "startup"  # startup, setup, probe:<name>, between, teardown, done
    check: str = None
    phase_started: float = 0.0
    offset: int = 0
    pending: str = ""
    exit_code: int = None

    @property
    def said_bye(self):
        return bool(self.records) and self.records[-1]["t"] == "bye"


@dataclasses.dataclass
class Abort:
    kind: str  # hang, crash, interrupted, setup_failed
    root_rank: int
    phase: str  # startup, setup, probe:<name>
    ranks: dict  # rank -> {exit_code, signal, stderr_tail, stack, last_record, phase, check}
    signum: int = None
    waited_s: float = None
    stop_s: float = None  # collecting stacks and killing the ranks


@dataclasses.dataclass
class Attempt:
    probes: list  # plan entries
    port: int
    records: dict  # rank -> list of records
    abort: Abort = None
    seconds: float = 0.0

    def setup_error(self):
        for recs in self.records.values():
            for r in recs:
                if r["t"] == "setup" and r["outcome"] == "failed":
                    return r["error"]
        return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_shim(workdir):
    """A directory holding only a link to the envcheck package, for the ranks' PYTHONPATH.

    Putting envcheck's own site-packages on the path of another interpreter would shadow
    that interpreter's torch with ours; this exposes envcheck and nothing else.
    """
    shim = os.path.join(workdir, "pythonpath")
    os.makedirs(shim, exist_ok=True)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.symlink(package, os.path.join(shim, "envcheck"))
    return shim


def _tail(path, limit=STDERR_TAIL_BYTES):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _signal_name(code):
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return "signal %d" % -code
    return None


class _AttemptRun:
    def __init__(self, interpreter, probes, nproc, backend, timeout, options, workdir,
                 shim, port, on_event, startup_timeout):
        self.interpreter = interpreter
        self.probes = probes
        self.nproc = nproc
        self.backend = backend
        self.timeout = timeout
        self.options = options
        self.dir = workdir
        self.shim = shim
        self.port = port
        self.on_event = on_event
        self.startup_timeout = startup_timeout
        self.ranks = []

    def start(self):
        plan_path = os.path.join(self.dir, "plan.json")
        with open(plan_path, "w", encoding="utf-8") as f:
            json.dump({"backend": self.backend, "timeout": self.timeout,
                       "group_timeout": 2 * self.timeout + 10,
                       "probes": self.probes, "options": self.options}, f)
        base = dict(os.environ)
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port),
                    WORLD_SIZE=str(self.nproc), LOCAL_WORLD_SIZE=str(self.nproc),
                    ENVCHECK_LAUNCHER="local", PYTHONUNBUFFERED="1")
        base["PYTHONPATH"] = os.pathsep.join(
            p for p in (self.shim, os.environ.get("PYTHONPATH")) if p)
        now = time.monotonic()
        for rank in range(self.nproc):
            env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
            out = open(os.path.join(self.dir, "stdout-rank%d.txt" % rank), "wb")
            err = open(os.path.join(self.dir, "stderr-rank%d.txt" % rank), "wb")
            try:
                proc = subprocess.Popen(
                    [self.interpreter, "-m", "envcheck.worker", "--plan", plan_path,
                     "--out", self.dir],
                    env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True)
            finally:
                out.close()
                err.close()
            self.ranks.append(RankState(rank, proc, [], phase_started=now))

    def _read(self, st):
        try:
            with open(records_path(self.dir, st.rank), encoding="utf-8") as f:
                f.seek(st.offset)
                chunk = f.read()
                st.offset = f.tell()
        except FileNotFoundError:
            return
        data = st.pending + chunk
        lines = data.split("\n")
        st.pending = lines.pop()  # a partial line waits for the rest
        for line in lines:
            if not line.strip():
                continue
            rec = json.loads(line)
            st.records.append(rec)
            self._advance(st, rec)

    def _advance(self, st, rec):
        kind, now = rec["t"], time.monotonic()
        if kind == "setup_start":
            st.phase, st.phase_started = "setup", now
        elif kind == "probe_start":
            st.phase, st.phase_started, st.check = "probe:" + rec["probe"], now, None
        elif kind == "check_start":
            st.check = rec["check"]
        elif kind == "check":
            st.check = None
        elif kind == "probe_end":
            st.phase, st.phase_started, st.check = "between", now, None
        elif kind == "teardown_start":
            st.phase, st.phase_started = "teardown", now
        elif kind == "bye":
            st.phase = "done"
        if self.on_event:
            self.on_event(rec)

    def _limit(self, st):
        return self.startup_timeout if st.phase == "startup" else self.timeout

    def watch(self):
        """Poll until every rank said bye, or an abort; returns an Abort or None."""
        while True:
            for st in self.ranks:
                self._read(st)
            live, died = False, []
            for st in self.ranks:
                code = st.proc.poll()
                if code is None:
                    live = True
                    continue
                if st.exit_code is None:
                    st.exit_code = code
                    self._read(st)
                    if not st.said_bye:
                        died.append(st)
            if died:
                setup = [st for st in died if st.exit_code == EXIT_SETUP_FAILED and any(
                    r["t"] == "setup" and r["outcome"] == "failed" for r in st.records)]
                if setup:
                    return self.stop("setup_failed", setup[0], stacks=False)
                # Ranks dying in one poll: a rank whose final barrier failed only reacted
                # to a peer's death; the peer is the root cause.
                died.sort(key=lambda st: st.exit_code == EXIT_TEARDOWN_FAILED)
                return self.stop("crash", died[0], stacks=True)
            if not live:
                return None
            now = time.monotonic()
            overdue = [st for st in self.ranks if st.exit_code is None
                       and st.phase != "done" and now - st.phase_started > self._limit(st)]
            if overdue:
                root = min(overdue, key=lambda s: s.phase_started + self._limit(s))
                return self.stop("hang", root, stacks=True,
                                 waited_s=now - root.phase_started)
            time.sleep(POLL_S)

    def stop(self, kind, root, stacks, waited_s=None, signum=None):
        t0 = time.monotonic()
        alive = [st for st in self.ranks if st.proc.poll() is None]
        if stacks and alive:
            self._collect_stacks(alive)
        self.kill_all()
        for st in self.ranks:
            self._read(st)
            if st.exit_code is None:
                st.exit_code = st.proc.returncode
        ranks = {}
        for st in self.ranks:
            ranks[st.rank] = {
                "exit_code": st.exit_code,
                "signal": _signal_name(st.exit_code),
                "stderr_tail": _tail(os.path.join(self.dir, "stderr-rank%d.txt" % st.rank)),
                "stack": _tail(stacks_path(self.dir, st.rank), 20000) if stacks else None,
                "last_record": st.records[-1] if st.records else None,
                "phase": st.phase,
                "check": st.check,
                "killed_by_envcheck": st in alive,
            }
        return Abort(kind, root.rank, root.phase, ranks, signum=signum, waited_s=waited_s,
                     stop_s=time.monotonic() - t0)

    def _collect_stacks(self, alive):
        for st in alive:
            try:
                os.kill(st.proc.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        # faulthandler writes from the signal handler, even while the rank sits in C++;
        # wait until every file has content and stopped growing, at most STACK_WAIT_S.
        deadline = time.monotonic() + STACK_WAIT_S
        sizes = {}
        while time.monotonic() < deadline:
            current = {}
            for st in alive:
                try:
                    current[st.rank] = os.path.getsize(stacks_path(self.dir, st.rank))
                except OSError:
                    current[st.rank] = 0
            if all(current.values()) and current == sizes:
                break
            sizes = current
            time.sleep(0.05)

    def kill_all(self):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for st in self.ranks:
                try:
                    os.killpg(st.proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + (TERM_GRACE_S if sig == signal.SIGTERM else 5.0)
            # After SIGTERM the leaders may be gone; SIGKILL still reaches any child
            # left in a rank's group.
            while time.monotonic() < deadline:
                if all(st.proc.poll() is not None for st in self.ranks):
                    break
                time.sleep(POLL_S)


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def _is_port_collision(error):
    text = "%s %s" % (error.get("type", ""), error.get("message", "")) if error else ""
    return "Address already in use" in text or "EADDRINUSE" in text


def supervise(interpreter, probes, nproc, backend, timeout, options=None, on_event=None,
              startup_timeout=None, master_port=None, notes=None, while_starting=None):
    """Run the probes (plan entries) over ``nproc`` ranks; returns the list of attempts.

    Never raises for anything a rank does. ``Interrupted`` is not raised either: an
    interrupted run returns its attempts with the last one's abort kind ``interrupted``.
    A rendezvous port found taken is retried on a free one, with a line in ``notes``.
    ``while_starting`` is called once, right after the first ranks are started: work
    that would otherwise wait for them (they spend a second or more importing torch).
    What it raises stops the ranks and propagates.
    """
    notes = [] if notes is None else notes
    startup_timeout = startup_timeout or max(120.0, timeout)
    workdir = tempfile.mkdtemp(prefix="envcheck-run-")
    os.chmod(workdir, 0o700)
    shim = make_shim(workdir)
    attempts = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _raise_interrupted)
    remaining = list(probes)
    port_tries = 0
    run = None
    try:
        while True:
            n = len(attempts) + port_tries
            adir = os.path.join(workdir, "attempt%d" % n)
            os.makedirs(adir)
            port = master_port if (master_port and not attempts and not port_tries) \
                else free_port()
            run = _AttemptRun(interpreter, remaining, nproc, backend, timeout,
                              options or {}, adir, shim, port, on_event, startup_timeout)
            t0 = time.monotonic()
            run.start()
            if while_starting is not None:
                while_starting()
                while_starting = None
            abort = run.watch()
            attempt = Attempt(remaining, run.port, {st.rank: st.records for st in run.ranks},
                              abort, time.monotonic() - t0)
            run.kill_all()  # children a rank left behind, even after a clean bye
            run = None
            if abort and abort.kind == "setup_failed" and \
                    _is_port_collision(attempt.setup_error()) and port_tries < PORT_RETRIES:
                # Taken by someone else (or between our free-port probe and the bind).
                port_tries += 1
                notes.append("port %d was taken at rendezvous; retried on a free port"
                             % attempt.port)
                continue
            attempts.append(attempt)
            if abort is None or not abort.phase.startswith("probe:"):
                break
            name = abort.phase[len("probe:"):]
            index = next(i for i, p in enumerate(remaining) if p["name"] == name)
            remaining = remaining[index + 1:]
            if not remaining:
                break
    except Interrupted as exc:
        for sig in previous:  # a second Ctrl-C must not cut the cleanup short
            signal.signal(sig, signal.SIG_IGN)
        if run is not None:
            root = run.ranks[0] if run.ranks else None
            abort = run.stop("interrupted", root, stacks=False, signum=exc.signum) \
                if root else Abort("interrupted", 0, "startup", {}, signum=exc.signum)
            attempts.append(Attempt(remaining, run.port,
                                    {st.rank: st.records for st in run.ranks}, abort, 0.0))
        else:
            attempts.append(Attempt(remaining, 0, {}, Abort("interrupted", 0, "startup", {},
                                                              signum=exc.signum)))
    finally:
        if run is not None:
            run.kill_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(workdir, ignore_errors=True)
    return attempts
