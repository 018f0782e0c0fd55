"""Launcher mode's watcher: a process beside each rank that bounds it and reports for it.

torchrun or srun start ``python -m envcheck.worker.launched``; that process forks the
rank (or, under torchrun with several local ranks, has the host's zygote fork it:
``hostzygote.py``, which then passes on the rank's wait status) and stays behind as its
*watcher*. A thread inside the rank cannot do this job: a
rank stuck in C++ (gloo's or NCCL's init, a collective) may hold the GIL, and then no
thread of its own runs (seen on torch 2.13 with gloo: the rendezvous wait ended only at
faulthandler's last-resort timer). A process of its own always runs. The watcher never
imports torch.

- **Timeouts.** It follows the rank's record file with the one phase tracker
  (``core.phases``). Past the plan's timeout in a phase it asks the rank for its stacks
  (SIGUSR1: faulthandler dumps them from C, GIL or not), and when the rank's main thread
  waits inside torch.distributed (for a peer) it grants one grace: the peer that is
  really stuck should be the one that reports. Then it writes the ``hang`` record, kills
  the rank and exits with ``RankExit.HANG`` (124).
- **The launcher's teardown** (SIGTERM, SIGINT, SIGHUP): passed on to the rank, which
  dumps its stacks on SIGTERM (``launched``) and dies; the watcher then does what it does
  for any bad end, below, before it exits, well inside torch elastic's 30 s grace.
- **A bad end** (setup failed, a crash, a hang, a teardown): it starts
  ``envcheck.worker.relay``, which sends what the rank could not (the ``hang`` record,
  the stacks) to the job's store and, on rank 0, collects every rank's records from it.
  Rank 0 then prints the judged report, hosts by name; a host without rank 0 prints one
  line that says where its records are and how to build the report from them.
- **Stopped ranks** (state T) cannot dump stacks or handle a signal: killed at once.
"""

import os
import signal
import sys
import time
import traceback

from ..core import blame
from ..core.outcomes import RankExit
from ..core.phases import PhaseTracker
from ..core.records import RecordTail, RecordWriter, records_path, stacks_path
from ..core.text import printable
from ..launch import contain, enclosure, procs, signals
from ..launch.group import RankGroup
from ..launch.watchdog import Watchdog, grace_for

POLL_S = 0.05
TERM_WAIT_S = 2.0  # for a rank told to stop (SIGTERM) before it is killed
REPORT_LIMIT_S = 300.0
COLLECTED = "collected"  # rank 0: every rank's files from the store, under --out


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class _Rank:
    """The watched rank as launch/group.py sees a process: seen to end once reaped (by
    this process, or by the zygote that forked it, which passes its status on)."""

    def __init__(self, watcher):
        self.watcher, self.pid = watcher, watcher.pid

    @property
    def returncode(self):
        status = self.watcher.exit_status
        return None if status is None else procs.exit_code(status)

    def poll(self):
        self.watcher._reap()
        return self.returncode


class Watcher:
    """One rank's watcher; ``run()`` returns the exit code for the launcher."""

    def __init__(self, pid, job, fork=None, pen=None, zygote=None):
        self.pid = pid
        self.fork = fork  # hostzygote.Fork: the host's zygote forked the rank, not this
        # launch/enclosure.py: what the rank starts, closed as soon as the rank has ended;
        # the host's zygote (this process started it) serves other ranks: spared
        self.pen = pen
        self.spare = [p for p in (zygote, fork.zygote_pid if fork else None) if p]
        self.launcher_pid = os.getppid()  # torchrun's agent, srun's step
        self.job = job  # launched.Job: rank, out, timeouts, run id, host, ...
        self.tail = RecordTail(records_path(job.out, job.rank))
        self.stacks = stacks_path(job.out, job.rank)
        # startup counts from this process's start: the host's zygote may have spent
        # some of it importing torch before it forked the rank
        self.tracker = PhaseTracker(job.started_mono)
        self.thread = None  # the rank's main thread, from its hello
        # The one deadline rule (launch/watchdog.py), with the grace for a rank waiting on
        # a peer: this process sees one rank only.
        self.watchdog = Watchdog(self.tracker, job.timeout, job.startup_timeout,
                                 limits={"report": REPORT_LIMIT_S},
                                 grace=grace_for(job.timeout))
        self.exit_status = None
        self.noted = None  # launch/signals.Noted, from run()
        # The rank, as launch/group.py signals and ends it: one this process forked is
        # its child (unreaped, its PID is its own; it shares this process's group); one
        # the host's zygote forked is signalled only while its parent is that zygote
        # (which forks nothing else), the process pinned first: the zygote may have
        # reaped it and its PID been reused since.
        self.group = RankGroup()
        zygote = fork.zygote_pid if fork is not None else None
        self.group.add(job.rank, _Rank(self),
                       proof=None if fork is None else
                       (lambda pid: procs.parent_of(pid) == zygote),
                       leads_group=False)

    # -- the loop ------------------------------------------------------------------------
    def _reap(self, block=False):
        if self.exit_status is not None:
            return True
        if self.fork is not None:  # its parent, the zygote, sends its wait status
            status = self.fork.status(block)
        else:
            try:
                pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid == 0:
                return False
        if status is None:
            return False
        self.exit_status = status
        if self.pen is not None:  # the rank is gone: so is whatever it started
            self.pen.close(self.spare)
        return True

    def _launcher_gone(self):
        """torchrun's agent (or srun's step) died without tearing the job down (it was
        SIGKILLed): this process now belongs to init."""
        return os.getppid() != self.launcher_pid

    def _follow(self):
        for rec in self.tail.poll():
            self.tracker.observe(rec)
            if rec["t"] == "hello":  # how the rank's main thread is named in its dumps
                self.thread = rec.get("thread")

    def run(self):
        # The launcher's SIGTERM, SIGINT, SIGHUP: noted, acted on in the loop.
        self.noted = signals.Noted().start()
        while True:
            self._follow()
            if self._reap():
                self._follow()
                return self._ended()
            if self.noted.signum is None and self._launcher_gone():
                sys.stderr.write(
                    "envcheck: rank %d on %s: the launcher (pid %d) is gone: ending the "
                    "rank\n" % (self.job.rank, printable(self.job.host), self.launcher_pid))
                self.noted.signum = signal.SIGHUP
            if self.noted.signum is not None:
                return self._torn_down()
            waited = time.monotonic() - self.tracker.started
            if waited > self.watchdog.limit():
                verdict = self._deadline(waited)
                if verdict is not None:
                    return verdict
            time.sleep(POLL_S)

    def _deadline(self, waited):
        """Past the limit: a grace for a rank waiting on a peer, else the hang."""
        if procs.is_stopped(self.pid):
            return self._hang(waited, in_collective=False, dump="", stopped=True)
        dump = self._ask_stacks()
        if self._reap():  # it ended while we asked
            return None
        in_collective = blame.waiting_in_distributed(dump)
        if in_collective and self.watchdog.extend():
            return None
        return self._hang(waited, in_collective, dump)

    def _ask_stacks(self):
        before = _size(self.stacks)
        if not self._signal(signal.SIGUSR1):
            return ""
        return blame.await_dumps({0: (self.stacks, before)}, {0: self.thread})[0]

    def _hang(self, waited, in_collective, dump, stopped=False):
        job, t = self.job, self.tracker
        where = t.phase + ("/%s" % t.check if t.check else "")
        why = ", stopped (state T): killed at once" if stopped else (
            ", waiting inside torch.distributed" if in_collective else "")
        line = ("envcheck: rank %d on %s: no progress for %.1f s in %s (timeout %g s)%s; "
                "exiting with code %d\n" % (job.rank, printable(job.host), waited, where, job.timeout,
                                            why, RankExit.HANG))
        # when the rank was killed: what its peers write from then on reacts to its end
        # (gloo's 'Connection closed by peer'), not to where the hang found them
        killed_at = time.time()
        self._kill()
        writer = RecordWriter(records_path(job.out, job.rank), job.rank)
        writer.write("hang", phase=t.phase, check=t.check, waited_s=round(waited, 3),
                     timeout=job.timeout, host=job.host, in_collective=in_collective,
                     stopped=stopped, killed_at=killed_at)
        writer.close()
        with open(self.stacks, "a", encoding="utf-8") as f:
            f.write(line)
        sys.stderr.write(line + (dump if dump.strip() else ""))
        sys.stderr.flush()
        return self._bad_end(RankExit.HANG)

    def _signal(self, sig):
        """Signal the rank; False where it is gone."""
        return self.group.signal(self.job.rank, sig)

    def _kill(self):
        self.group.kill_now([self.job.rank])
        self._reap(block=True)

    def _torn_down(self):
        """The launcher stops the job: the rank dumps its stacks on SIGTERM and goes."""
        signals.ignore(*signals.SIGNALS)  # finish the report; elastic waits 30 s
        if procs.is_stopped(self.pid):
            self._kill()
        else:
            self.group.close(TERM_WAIT_S)
            if self.exit_status is None:
                self._kill()
        self._follow()
        return self._bad_end(128 + self.noted.signum)

    def _ended(self):
        status = self.exit_status
        code = os.waitstatus_to_exitcode(status)
        if self.tracker.phase == "report" or code == RankExit.USAGE or (
                code == RankExit.OK and self.tracker.phase in ("gather", "done")):
            return code  # rank 0 reported (its code is the report's), or a good end
        return self._bad_end(code if code > 0 else 128 - code if code < 0 else 1)

    # -- after a bad end -----------------------------------------------------------------
    def _bad_end(self, code):
        job = self.job
        collect = os.path.join(job.out, COLLECTED) if job.rank == 0 else None
        silent = job.relay(collect)
        if job.rank != 0:
            if job.local_rank == 0:
                sys.stderr.write(
                    "envcheck: %s: the job failed (rank %d exited %d); rank 0 prints the "
                    "report. This host's records: envcheck report --records %s\n" % (
                        printable(job.host), job.rank, code, os.path.abspath(job.out)))
                if silent is None and job.launcher == "torchrun":
                    # Seen with torch 2.13: the agent's monitor loop blocks on the
                    # rendezvous store (num_nodes_waiting) and never sees its ranks end.
                    sys.stderr.write(
                        "envcheck: %s cannot reach the job's store at %s:%s; if torchrun's "
                        "agent here (pid %d) does not exit, it is blocked on its "
                        "rendezvous there: stop it (Ctrl-C, or kill %d)\n" % (
                            printable(job.host), os.environ.get("MASTER_ADDR"),
                            os.environ.get("MASTER_PORT"), os.getppid(), os.getppid()))
            return code
        return job.report_after_failure(collect, silent, code)


def fork_rank(run_rank, pen):
    """Fork the rank (it runs ``run_rank()`` and never returns) in its enclosure ``pen``
    (launch/enclosure.py); the caller watches it."""
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    # The rank inherits this until it registers faulthandler for SIGUSR1: a request for
    # its stacks that comes before must not kill it (SIGUSR1's default). The watcher
    # itself is never sent one.
    signals.ignore(signal.SIGUSR1)
    pid = procs.fork()
    if pid == 0:
        try:
            contain.die_with_parent(parent)
            enclosure.enter(pen.path)
            os.environ.update(pen.environ({}))
            run_rank()
        except BaseException:
            traceback.print_exc()  # the rank's own error, in the launcher's log
            sys.stderr.flush()
        finally:
            os._exit(1)
    return pid


def run_helper(cmd, timeout, stdout=procs.PIPE):
    """A helper process (the relay, the report) out of the launcher's reach: torch
    elastic signals the whole process group of a rank it tears down, and these must
    finish the report then. Its own session keeps it out of that group; it still dies
    with this process (PR_SET_PDEATHSIG) and within ``timeout``. ``stdout=None``: it
    writes to this process's stdout (the report's screen, fitted to a terminal)."""
    parent = os.getpid()
    return procs.run(cmd, stdout=stdout, stderr=procs.PIPE, text=True,
                     timeout=timeout, stdin=procs.DEVNULL, start_new_session=True,
                     preexec_fn=lambda: contain.die_with_parent(parent))


def start_helper(cmd, stdout=procs.PIPE):
    """``run_helper``'s process, started now and fed on its stdin later (Popen)."""
    parent = os.getpid()
    return procs.popen(cmd, stdout=stdout, stderr=procs.PIPE, text=True,
                       stdin=procs.PIPE, start_new_session=True,
                       preexec_fn=lambda: contain.die_with_parent(parent))


def run_relay(job, collect):
    """``python -m envcheck.worker.relay`` for this rank; the ranks that never said done
    (rank 0 with ``collect``), or None when the store was out of reach."""
    cmd = [sys.executable, "-m", "envcheck.worker.relay", "--out", job.out,
           "--run-id", job.run_id, "--rank", str(job.rank),
           "--world-size", str(job.world_size), "--local-rank", str(job.local_rank),
           "--local-world-size", str(job.local_world_size), "--wait", str(job.collect_wait)]
    if collect:
        cmd += ["--collect", collect]
    try:
        proc = run_helper(cmd, job.collect_wait + 60)
    except (OSError, procs.TimeoutExpired):
        return None
    if proc.returncode != 0:
        # torch's C++ log of every connect retry is noise here: our own line says it,
        # once per host
        ours = [l for l in proc.stderr.splitlines() if l.startswith("envcheck:")]
        if job.local_rank == 0:
            sys.stderr.write("".join(l + "\n" for l in ours[-1:]))
        return None
    out = proc.stdout.strip()
    return [int(r) for r in out.split(",") if r.strip()] if collect else []
