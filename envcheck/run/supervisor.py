"""Start the ranks, watch their record streams, and always come back with an answer.

The local driver of the run model (``envcheck.core``); launcher mode is the other.
Shaped like torch elastic's process context: deadlines on a monotonic clock, SIGTERM
then SIGKILL to each rank's whole process group, results keyed by rank, and the root
cause chosen by ``core.blame`` (ranks stuck after a peer failed are consequences).

One *attempt* starts ``nproc`` fresh ranks for a list of probes. It ends when every rank
said ``bye``, or is aborted:

- ``hang``: a rank spent longer than the timeout in one phase (startup, setup, a probe,
  between probes, teardown). Every rank is asked for its Python stacks (SIGUSR1, see
  the worker) before they are killed.
- ``crash``: a rank exited without saying ``bye``; exit code or signal and the tail of
  its stderr are kept.
- ``setup_failed``: init_process_group failed (the rank said why, and exited 3).
- ``interrupted``: SIGINT, SIGTERM or SIGHUP reached envcheck. The handlers only note
  the signal; the watch loop acts on it, so a signal never lands between starting a rank
  and recording it.

Nothing started here outlives the run (``launch.contain``): ranks carry the run's marker
and a lifeline, their TMPDIR is inside the run's 0700 work directory, and every attempt
ends by killing whatever still carries the marker.

After a hang or crash inside a probe, a new attempt runs the probes that were left.

The ranks of an attempt are forked by a zygote that imported torch once (``spawn``);
while a rank sits long in one phase, the next attempt's zygote is started early, so that
its ranks are forked the moment a hang is declared.
"""

import os
import signal
import socket
import time

from . import headstart, spawn
from ..core import blame, plan as plan_mod
from ..launch import cgroup as cgroup_mod, contain, procs, signals as signals_mod
from ..launch.group import RankGroup
from ..launch.watchdog import Watchdog
from ..core.attempt import Abort, AbortKind, Attempt
from ..core.outcomes import RankExit
from ..core.phases import PhaseTracker
from ..core.records import RecordTail, records_path, stacks_path

POLL_S = 0.02
TERM_GRACE_S = 2.0
STDERR_TAIL_BYTES = 4000
STACK_BYTES = 20000
PORT_RETRIES = 3


class RankState:
    def __init__(self, rank, proc, out_dir, now, timeout, startup_timeout):
        self.rank = rank
        self.proc = proc
        self.records = []
        self.tail = RecordTail(records_path(out_dir, rank))
        self.tracker = PhaseTracker(started=now)
        # The one deadline rule (launch/watchdog.py); no grace here: the supervisor sees
        # every rank's stacks and blames the one that is really stuck (core/blame.py).
        self.watchdog = Watchdog(self.tracker, timeout, startup_timeout)
        self.exit_code = None

    @property
    def said_bye(self):
        return bool(self.records) and self.records[-1]["t"] == "bye"


def port_is_free(port):
    """Can a rendezvous bind this port now? Checked before any rank starts: a rank that
    connected to another job's store there would write keys into it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    def __init__(self, interpreter, plan, nproc, out_dir, workspace, port, on_event,
                 startup_timeout, signals):
        self.interpreter = interpreter
        self.workspace = workspace  # headstart.Workspace: the run's directory and marker
        self.use_zygote = workspace.forking
        self.zygote = None  # while it imports torch and forks: ranks come from it
        self._read_end = None
        self.signals = signals
        self.lifeline = None
        self.plan = plan
        self.nproc = nproc
        self.timeout = plan["timeout"]
        self.dir = out_dir
        self.port = port
        self.on_event = on_event
        self.startup_timeout = startup_timeout
        self.ranks = []
        # The same ranks, for signalling and ending them (launch/group.py): each leads a
        # session of its own, and a signal reaches it only while it is not reaped.
        self.group = RankGroup()
        self.started = None  # Unix time the ranks were started (the report's timing)
        self.prepared = None  # Unix time its zygote began importing torch
        self.on_slow = None  # called once when a rank may be hanging (see _slow)
        self.spare_pids = set()  # the next attempt's zygote, waiting: not this one's to kill
        self.faults = []  # what the zygote printed that is not its protocol: for the notes
        self.cgroup = None  # launch/cgroup.py: where the machine offers one

    def start(self, go=True, head=None):
        """Start the ranks; ``go=False`` (a zygote only) holds them until ``adopt``.
        ``head``: a HeadStart whose zygote (already importing torch) forks them."""
        plan_path = os.path.join(self.dir, "plan.json")
        plan_mod.write(plan_path, self.plan)
        self._argv = ["--plan", plan_path, "--out", self.dir]
        # The attempt's own variables; the rest every process of the run shares.
        self._attempt_env = dict(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port),
                                 WORLD_SIZE=str(self.nproc), LOCAL_WORLD_SIZE=str(self.nproc))
        if head is not None:
            self._read_end, self.lifeline, self.zygote = head.read_end, head.lifeline, \
                head.zygote
        else:
            self._read_end, self.lifeline = os.pipe()
        self._base = self.workspace.env(self._read_end)
        self.cgroup = cgroup_mod.make()
        if self.zygote is not None:
            self._contain(self.zygote.proc.pid)
        self.launched = time.monotonic()
        self.started = time.time()
        self.prepared = self.zygote.started if self.zygote is not None else self.started
        if self.use_zygote:
            # The ranks come from the zygote (see run/spawn.py); watch() takes them in.
            if self.zygote is None:
                self.zygote = spawn.Zygote(self.interpreter, self._base, self.dir,
                                           (self._read_end,))
                self._contain(self.zygote.proc.pid)
            if go:
                self._go()
            else:
                self.zygote.preload(self.plan["probes"])
        else:
            self._start_each()

    def _contain(self, pid):
        """Into the attempt's cgroup, before it starts anything (it imports torch first)."""
        if self.cgroup is not None:
            self.cgroup.add(pid)

    def _go(self):
        self.zygote.go(self.nproc, self._argv, self.plan["probes"], self.dir,
                       self._attempt_env)

    def adopt(self, plan):
        """A spare (started with ``go=False``) becomes the attempt that runs ``plan``:
        the ranks read the plan file after they are forked, so it is written now."""
        self.plan = plan
        plan_mod.write(self._argv[1], plan)
        self.launched = time.monotonic()
        self.started = time.time()
        if self.zygote is not None:
            self._go()
        elif not self.ranks:  # the zygote failed while it waited
            self._start_each()

    def usable_spare(self):
        """Can this spare still become the next attempt (its zygote alive, or ready)?"""
        return self.zygote is not None and self.zygote.proc.poll() is None

    def _slow(self, now):
        """Is a rank so long in one phase that a hang is likely? Then the ranks of the
        attempt after it are worth preparing now (``on_slow``): a zygote importing torch
        while the deadline approaches, so fresh ranks start the moment it passes. Soon
        enough before the deadline for an import as slow as this attempt's, and never
        in the first quarter of the timeout (probes that are merely slow)."""
        imports = [r.get("torch_import_s") or 0 for st in self.ranks for r in st.records[:1]
                   if r["t"] == "hello"]
        lead = 3 * max(imports or [5.0]) + 1.0
        after = max(self.timeout / 4.0, self.timeout - lead)
        return any(st.exit_code is None and st.tracker.phase not in ("startup", "done")
                   and now - st.tracker.started > after for st in self.ranks)

    def _start_each(self):
        """One interpreter per rank, each importing torch itself."""
        for rank in range(self.nproc):
            env = dict(self._base, **self._attempt_env)
            env.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
            out = open(os.path.join(self.dir, "stdout-rank%d.txt" % rank), "wb")
            err = open(os.path.join(self.dir, "stderr-rank%d.txt" % rank), "wb")
            try:
                proc = procs.popen(
                    [self.interpreter, "-m", "envcheck.worker.rank"] + self._argv,
                    env=env, stdin=procs.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, pass_fds=(self._read_end,))
            finally:
                out.close()
                err.close()
            self._contain(proc.pid)
            self.ranks.append(RankState(rank, proc, self.dir, time.monotonic(),
                                        self.timeout, self.startup_timeout))
            self.group.add(rank, proc)
        self._ranks_started()

    def _ranks_started(self):
        os.close(self._read_end)  # the ranks hold it; this side keeps only the write end
        self._read_end = None

    def _take_zygote_ranks(self):
        """Once the zygote forked every rank: track them (their startup began when the
        zygote did). When it failed or outlived the startup timeout: start each rank
        the usual way. True while the ranks are not there yet."""
        ranks = self.zygote.poll()
        if ranks is None and time.monotonic() > self.launched + self.startup_timeout:
            self.zygote.kill()
            ranks = False
        if ranks is None:
            return True
        self._drop_zygote()
        if ranks is False:
            self._restart_without_zygote()
            return False
        self._track(ranks)
        return False

    def _track(self, ranks):
        self.ranks = [RankState(rank, proc, self.dir, self.launched, self.timeout,
                                self.startup_timeout)
                      for rank, proc in enumerate(ranks)]
        self.group = RankGroup()
        for rank, proc in enumerate(ranks):
            self.group.add(rank, proc)
        self._ranks_started()

    def _finish_forking(self):
        """Stopped once the zygote forked every rank but before it was seen to exit (on
        a loaded node, ending a process that imported torch takes a while): its ranks
        run already, and write records. They become this attempt's now (the zygote had
        nothing left to do), so that they are stopped as ranks and what they did
        reaches the report."""
        zygote = self.zygote
        if zygote is None:
            return
        ranks = zygote.poll()
        if ranks is None and zygote.forked_all():
            ranks = zygote.end()
        if ranks:
            self._drop_zygote()
            self._track(ranks)

    def _drop_zygote(self):
        self.faults += self.zygote.faults
        self.zygote = None

    def _restart_without_zygote(self):
        """The zygote failed, perhaps after forking some ranks (all killed by now, see
        ``Zygote._kill_forked``): start each rank anew, on a fresh rendezvous port, so
        that nothing of the failed fork can meet the new ranks, and on fresh files, so
        that nothing a killed fork wrote is read as theirs."""
        for rank in range(self.nproc):
            for path in (records_path(self.dir, rank), stacks_path(self.dir, rank)):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        self.port = free_port()
        self._attempt_env["MASTER_PORT"] = str(self.port)
        self._start_each()

    def _read(self, st, until=None):
        """The rank's new records (those written before ``until`` only, a time.time())."""
        for rec in st.tail.poll():
            if until is not None and rec.get("time", 0) >= until:
                continue
            st.records.append(rec)
            st.tracker.observe(rec)
            if self.on_event:
                self.on_event(rec)

    def watch(self):
        """Poll until every rank said bye, or an abort; returns an Abort or None."""
        while True:
            if self.signals.signum is not None:
                return self.stop("interrupted", 0, stacks=False, signum=self.signals.signum)
            if self.zygote is not None and self._take_zygote_ranks():
                time.sleep(POLL_S)
                continue
            for st in self.ranks:
                self._read(st)
            died = self._newly_dead()
            if died:
                return self._abort_for_deaths(died)
            if all(st.exit_code is not None for st in self.ranks):
                return None
            now = time.monotonic()
            if any(st.exit_code is None and st.tracker.phase != "done"
                   and st.watchdog.expired(now) for st in self.ranks):
                return self.stop("hang", None, stacks=True)
            if self.on_slow is not None and self._slow(now):
                self.on_slow()
                self.on_slow = None
            time.sleep(POLL_S)

    def _newly_dead(self):
        died = []
        for st in self.ranks:
            code = st.proc.poll()
            if code is not None and st.exit_code is None:
                st.exit_code = code
                self._read(st)
                if not st.said_bye:
                    died.append(st)
        return died

    def _abort_for_deaths(self, died):
        setup = [st for st in died if st.exit_code == RankExit.SETUP_FAILED and any(
            r["t"] == "setup" and r["outcome"] == "failed" for r in st.records)]
        if setup:
            return self.stop("setup_failed", setup[0].rank, stacks=False)
        # Ranks dying in one poll: a rank whose final barrier failed only reacted to a
        # peer's death; the peer is the root cause.
        root = blame.crash_root([blame.Casualty(
            st.rank, st.exit_code == RankExit.TEARDOWN_FAILED, 0) for st in died])
        return self.stop("crash", root, stacks=True)

    def stop(self, kind, root, stacks, signum=None):
        """Collect stacks (if asked), kill every rank, and describe the abort.

        ``root`` None (a hang) is chosen here, from the stacks: see ``core.blame``.
        """
        t0 = time.monotonic()
        if not self.ranks:
            self._finish_forking()
        if not self.ranks:  # interrupted while the zygote was still importing torch
            self.kill_all()
            return Abort(kind, root, "startup", {}, signum=signum, stop_s=time.monotonic() - t0)
        alive = [st for st in self.ranks if st.proc.poll() is None]
        stopped = {st.rank for st in alive if procs.is_stopped(st.proc.pid)}
        if stacks and alive:
            self._collect_stacks([st for st in alive if st.rank not in stopped])
        dumps = {st.rank: _tail(stacks_path(self.dir, st.rank), STACK_BYTES)
                 for st in self.ranks} if stacks else {}
        waited = limit = deadline = waiting = None
        if root is None:
            stuck = [st for st in alive if st.tracker.phase != "done"] or alive
            suspects = [blame.Suspect(
                st.rank, blame.waiting_in_distributed(dumps.get(st.rank)),
                st.watchdog.deadline(), st.tracker.phase) for st in stuck]
            root = blame.hang_root(suspects)
            waited = t0 - self.ranks[root].tracker.started
            # The limit that ran out: the root's own, or, for a rank that never started,
            # that of the ranks waiting for it at the rendezvous.
            expired = self.ranks[root]
            if expired.watchdog.deadline() > t0:
                waiting = blame.waiting_for(suspects, root) or None
                expired = min((st for st in stuck if st.watchdog.deadline() <= t0),
                              key=lambda st: st.watchdog.deadline(), default=expired)
            limit = expired.watchdog.limit()
            deadline = time.time() - (time.monotonic() - expired.watchdog.deadline())
        # stopped ranks (state T) get SIGKILL at once, with the others' SIGTERM: a stopped
        # process runs no handler, so SIGUSR1 (stacks) and SIGTERM would only wait, pending,
        # through the stack wait and the SIGTERM grace. They are not continued (SIGCONT)
        # for a stack first: whoever stopped the rank (a debugger, job control) meant it
        # not to run, a traced one (state t) would not run anyway, and its stack would only
        # show where it was stopped, not why; the report says it was stopped, the cause.
        # What a rank still alive writes once envcheck begins to stop the ranks is its
        # reaction to that, not its outcome: the peer whose SIGTERM came first exits,
        # and a rank whose own SIGTERM has not come yet (this process descheduled
        # between the two on a loaded node) fails its barrier with gloo's "Connection
        # closed by peer" and records it, in place of where it was waiting (a CI run's
        # straggler test read rank 2's record so).
        stopping = time.time()
        self.kill_all(at_once=stopped)
        for st in self.ranks:
            self._read(st, until=stopping if st in alive else None)
            if st.exit_code is None:
                st.exit_code = st.proc.returncode
        ranks = {st.rank: {
            "exit_code": st.exit_code,
            "signal": _signal_name(st.exit_code),
            "stderr_tail": _tail(os.path.join(self.dir, "stderr-rank%d.txt" % st.rank)),
            "stack": dumps.get(st.rank),
            "last_record": st.records[-1] if st.records else None,
            "phase": st.tracker.phase,
            "check": st.tracker.check,
            "killed_by_envcheck": st in alive,
            "stopped": st.rank in stopped,
        } for st in self.ranks}
        return Abort(kind, root, self.ranks[root].tracker.phase, ranks, signum=signum,
                     waited_s=waited, limit_s=limit, stop_s=time.monotonic() - t0,
                     deadline=deadline, waiting=waiting)

    def _collect_stacks(self, alive):
        for st in alive:
            self.group.signal(st.rank, signal.SIGUSR1)
        # faulthandler writes from the signal handler, even while the rank sits in C++
        blame.await_dumps({st.rank: (stacks_path(self.dir, st.rank), 0) for st in alive},
                          {st.rank: next((r.get("thread") for r in st.records
                                          if r["t"] == "hello"), None) for st in alive})

    def attempt(self, seconds):
        return Attempt(self.plan["probes"], self.port,
                       {st.rank: st.records for st in self.ranks}, None, seconds,
                       torn=sum(st.tail.torn for st in self.ranks), started=self.started,
                       prepared=self.prepared if self.prepared != self.started else None)

    def kill_all(self, at_once=()):
        """End every rank and everything they started; ``at_once``: ranks killed with
        SIGKILL straight away (``Group.close``)."""
        if self.zygote is not None:
            self.zygote.kill()
            self._drop_zygote()
        # After SIGTERM the leaders may be gone (reaped: their groups no longer
        # signalled); what is left of a group is found below (cgroup, marker, subreaper).
        self.group.close(TERM_GRACE_S, at_once=at_once)
        # What left the ranks' process groups (setsid) is still in the attempt's cgroup,
        # and carries the run's marker; what also cleared its environment is still
        # below this process, its subreaper.
        if self.cgroup is not None:
            self.cgroup.kill()
        contain.kill_marked(self.workspace.id, exclude=self.spare_pids)
        contain.kill_descendants(exclude=self.spare_pids)
        if self.workspace.reaping:
            contain.reap_orphans({st.proc.pid for st in self.ranks} | self.spare_pids)

    def close(self):
        """The attempt is over: no rank may outlive it, and its lifeline goes."""
        self.kill_all()
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None
        if self._read_end is not None:
            os.close(self._read_end)
            self._read_end = None
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None


def _is_port_collision(error):
    text = "%s %s" % (error.get("type", ""), error.get("message", "")) if error else ""
    return "Address already in use" in text or "EADDRINUSE" in text


def _remaining_after(attempt):
    """The probes a fresh attempt should run after this one, or None to stop."""
    abort = attempt.abort
    if abort is None or not abort.phase.startswith("probe:"):
        return None
    name = abort.phase[len("probe:"):]
    index = next(i for i, p in enumerate(attempt.probes) if p["name"] == name)
    return attempt.probes[index + 1:] or None


def _interrupted_attempt(port, entries, signum):
    """Interrupted between attempts: no rank was running."""
    return Attempt(entries, port, {}, Abort(AbortKind.INTERRUPTED, 0, "startup", {}, signum=signum))


def supervise(interpreter, plan, nproc, on_event=None, startup_timeout=None,
              master_port=None, notes=None, while_starting=None, head=None):
    """Run the plan (``core.plan.rank_plan``) over ``nproc`` ranks; returns the attempts.

    Never raises for anything a rank does, nor for SIGINT / SIGTERM / SIGHUP: an
    interrupted run returns its attempts with the last one's abort kind ``interrupted``.
    A rendezvous port found taken is retried on a free one, with a line in ``notes``.
    ``while_starting`` is called once, right after the first ranks are started: work
    that would otherwise wait for them (they spend a second or more importing torch).
    What it raises stops the ranks and propagates. ``head``: the run's head start
    (``run/headstart.py``); its zygote forks the first attempt's ranks when it was made
    for ``interpreter``.
    """
    notes = [] if notes is None else notes
    if master_port and not port_is_free(master_port):
        notes.append("port %d is in use by another program; used a free port instead"
                     % master_port)
        master_port = None
    startup_timeout = startup_timeout or plan_mod.startup_timeout(plan["timeout"])
    attempts = []
    entries = list(plan["probes"])
    port_tries = 0
    run = spare = None

    def new_run(entries, port, out_dir=None):
        return _AttemptRun(interpreter, dict(plan, probes=entries), nproc,
                           out_dir or workspace.attempt_dir(), workspace, port, on_event,
                           startup_timeout, signals)

    def prepare_next(current, entries):
        """This attempt may be hanging: the next one's zygote imports torch now."""
        nonlocal spare
        spare = new_run(entries, free_port())
        spare.start(go=False)
        current.spare_pids = {spare.zygote.proc.pid}

    # From here a signal is a note: nothing is left half-made.
    with signals_mod.Noted() as signals:
        head = head.take(interpreter) if head is not None else None
        workspace = head.workspace if head is not None else headstart.Workspace(interpreter)
        try:
            while entries:
                if signals.signum is not None:
                    attempts.append(_interrupted_attempt(0, entries, signals.signum))
                    break
                t0 = time.monotonic()
                port = master_port if (master_port and not attempts and not port_tries) \
                    else None
                if head is not None:
                    run = new_run(entries, port or free_port(), head.attempt_dir)
                    run.start(head=head)
                    head = None
                elif spare is not None and spare.usable_spare():
                    run, spare = spare, None
                    run.adopt(dict(plan, probes=entries))
                else:
                    if spare is not None:
                        spare.close()
                        spare = None
                    run = new_run(entries, port or free_port())
                    run.start()
                if while_starting is not None:
                    while_starting()
                    while_starting = None
                if workspace.forking and len(entries) > 1:
                    run.on_slow = lambda run=run, rest=entries: prepare_next(run, rest)
                abort = run.watch()
                attempt = run.attempt(time.monotonic() - t0)
                attempt.abort = abort
                run.close()  # children a rank left behind, even after a clean bye
                notes += run.faults
                run = None
                if abort and abort.kind == "setup_failed" and port_tries < PORT_RETRIES \
                        and _is_port_collision(attempt.setup_error()):
                    # Taken by someone else (or between our free-port probe and the bind).
                    port_tries += 1
                    notes.append("port %d was taken at rendezvous; retried on a free port"
                                 % attempt.port)
                    continue
                attempts.append(attempt)
                if abort and abort.kind == "interrupted":
                    break
                entries = _remaining_after(attempt)
                if spare is not None and not entries:
                    spare.close()  # prepared for an attempt that will not come
                    spare = None
        finally:
            if head is not None:  # taken, never started: its zygote and lifeline go too
                head.zygote.kill()
                os.close(head.read_end)
                os.close(head.lifeline)
            if run is not None:
                run.close()
            if spare is not None:
                spare.close()
            workspace.close()
    return attempts
