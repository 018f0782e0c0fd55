"""The report of a torchrun / srun run, built from the ranks' records (no torch here).

Ranks started by a launcher (``python -m envcheck.worker.launched``) leave record streams
and stack files; this turns them into the same ``Report`` as ``envcheck run`` by
replaying them as one supervisor *attempt* and handing that to ``merge``:

- ``--records DIR/records.jsonl``: what rank 0 gathered from every rank at the end;
- ``--records DIR``: each rank's own ``records-rank*.jsonl`` (and ``stacks-rank*.txt``),
  when the job was torn down before rank 0 could gather (a hang, a crash), with the
  directories of every node copied together, or a shared ``--out``.

The supervisor is not there to watch, so the abort is read from what the ranks left,
and the root cause chosen by the same rule (``core.blame``): a ``hang`` record from a
rank's watcher (a rank that was *not* waiting inside torch.distributed, else the first
to report); else a rank without ``bye`` that left no SIGTERM stack dump — it died on its
own, while the others were torn down by the launcher; when every rank left one, the
launcher terminated them all (``interrupted``, "terminated by the launcher"). Lines that
are not whole records (a rank killed mid-write; in ``records.jsonl`` such a line can sit in the middle) are
skipped and counted in a note.
"""

import datetime
import glob
import os
import re
import signal

from .. import __version__
from ..core import blame, limits, records as records_mod
from ..core.attempt import Abort, AbortKind, Attempt
from ..core.errors import UsageError
from ..core.network.lookup import is_loopback
from ..core.network.prechecks import PEER_PRECHECK_FAILED
from ..core.phases import replay
from ..core.records import MERGED_RECORDS
from ..report.model import Report
from . import follow_up, merge

_RANK_FILE = re.compile(r"records-rank(\d+)\.jsonl$")


# What a job's records can be: rank 0's records.jsonl of 10,000 hosts is about 340 MB
# (docs/scale.md); a stack dump is kilobytes.
RECORDS_LIMIT = 512 << 20
STACKS_LIMIT = 16 << 20
# More ranks than any job has had (the largest run on tens of thousands of GPUs): a
# world size above this is not a job's, and every rank would cost memory here.
MAX_WORLD_SIZE = 1 << 20


def _read(path, limit=RECORDS_LIMIT):
    """A record or stack file: a regular file only, read without blocking (a FIFO with
    no writer) and at most ``limit`` bytes (a link to /dev/zero): else one line."""
    try:
        return limits.read_input(path, limit).decode("utf-8", "replace")
    except limits.InputError as exc:
        raise UsageError("cannot read %s: %s" % (path, exc)) from None
    except OSError as exc:
        raise UsageError("cannot read %s: %s" % (path, exc.strerror or exc)) from None


def _world(launch):
    """The job's world size, as its launch record says: a number of ranks, or one line."""
    world = launch.get("world_size")
    if isinstance(world, str) and world.strip().isdigit():
        world = int(world)
    if isinstance(world, bool) or not isinstance(world, int) or \
            not 1 <= world <= MAX_WORLD_SIZE:
        raise UsageError("the launch record's world_size %r is not a job's number of ranks "
                         "(1 to %d): these are not records envcheck wrote"
                         % (world, MAX_WORLD_SIZE))
    return world


def _no_rank_hint():
    """Why no rank may have started: the launcher itself failing first. A torch on a
    Python it has wheels for but does not support is one known cause (releases.toml's
    python_supported; torch 1.13's torchrun on Python 3.11 fails before any rank starts)."""
    try:
        from ..matrix import load as matrix_load

        narrower = [r for r in matrix_load.load().releases if r.python_supported]
    except UsageError:
        narrower = []
    hint = ("; if the launcher failed before starting any rank, its own output says why")
    if narrower:
        hint += (" (a torch on a Python it does not support fails there, e.g. %s: "
                 "'envcheck matrix' lists the Pythons each release supports)"
                 % "; ".join("torch %s supports Python %s only" % (
                     r.series, ", ".join(r.python_supported)) for r in narrower))
    return hint


def load(path):
    """rank -> records, rank -> stacks text, and how many torn lines were skipped."""
    torn = 0
    if os.path.isdir(path):
        directory = path
        files = {int(m.group(1)): os.path.join(path, name)
                 for name in os.listdir(path) for m in [_RANK_FILE.match(name)] if m}
        if not files:
            hint = " (rank 0 wrote %s there)" % MERGED_RECORDS if os.path.exists(
                os.path.join(path, MERGED_RECORDS)) else ""
            raise UsageError("%s holds no records-rank*.jsonl%s%s"
                             % (path, hint, "" if hint else _no_rank_hint()))
        per_rank = {}
        for rank, p in files.items():
            per_rank[rank], bad = records_mod.parse(_read(p))
            torn += bad
    elif os.path.isfile(path):
        directory = os.path.dirname(os.path.abspath(path))
        per_rank = {}
        records, torn = records_mod.parse(_read(path))
        for rec in records:
            per_rank.setdefault(rec["rank"], []).append(rec)
    else:
        raise UsageError("%s: no such file or directory%s" % (path, _no_rank_hint()))
    if not any(per_rank.values()):
        raise UsageError("%s holds no envcheck records" % path)
    stacks = {}
    for p in glob.glob(os.path.join(directory, "stacks-rank*.txt")):
        m = re.search(r"stacks-rank(\d+)\.txt$", p)
        text = _read(p, STACKS_LIMIT).strip()
        if m and text:
            stacks[int(m.group(1))] = text
    return per_rank, stacks, torn


def _launch_record(per_rank):
    for rank in sorted(per_rank):
        rec = next((r for r in per_rank[rank] if r["t"] == "launch"), None)
        if rec:
            return rec
    raise UsageError("no 'launch' record: these are not records of "
                     "'python -m envcheck.worker.launched'")


def _current(per_rank, launch):
    """Only this job's ranks: a reused --out may hold files of an earlier, bigger job."""
    world = _world(launch)
    kept, stale = {}, []
    for rank, recs in sorted(per_rank.items()):
        mine = next((r for r in recs if r["t"] == "launch"), None)
        if rank >= world or (mine and (mine.get("run_id"), mine.get("world_size")) !=
                             (launch.get("run_id"), launch.get("world_size"))):
            stale.append(rank)
        else:
            kept[rank] = recs
    return kept, stale


# A peer's end as a rank's error shows it: gloo's 'Connection closed by peer [ADDR]:PORT'
# and 'Read error [ADDR]:PORT: Connection reset by peer' (third_party/gloo/gloo/
# transport/tcp/pair.cc; both seen here, torch 2.13, tests/test_cluster_torchrun.py).
_PEER_ENDED = re.compile(r"(?:closed|reset) by peer", re.I)


def _before_the_kill(per_rank, hosts):
    """The ranks' records as the hang found them: what a rank wrote once a watcher had
    killed a hung rank is its reaction to that end, not its outcome.

    A hung rank's watcher kills it, and its peers' waits on it fail at once (gloo's
    'Connection closed by peer'): they recorded that failure, and their teardown, before
    torchrun's SIGTERM came, where ``envcheck run``'s supervisor stops every rank together
    (its own reads stop at that moment, ``supervisor.stop``). From the first hang
    record's ``killed_at`` on, a rank with no hang record of its own keeps nothing on the
    killed rank's host (one clock), and on other hosts nothing from its first failure that
    names a peer's end on (their clocks may be a little off: a failure of its own stays).

    Returns the records kept and the ranks that reacted (whose records were cut): each
    was waiting on a peer when the kill came, though its watcher may not have dumped its
    stacks before (its deadline a little after the hung rank's), and is blamed as one.
    """
    kills = [(rec.get("killed_at", rec["time"]), rank) for rank, recs in per_rank.items()
             for rec in recs if rec["t"] == "hang"]
    if not kills:
        return per_rank, set()
    stop, killed = min(kills)
    hung = {rank for _, rank in kills}
    kept, reacted = {}, set()
    for rank, recs in per_rank.items():
        cut = len(recs)
        if rank not in hung:
            same_clock = hosts.get(rank) == hosts.get(killed)
            cut = next((i for i, rec in enumerate(recs) if rec.get("time", 0) >= stop and (
                same_clock or _PEER_ENDED.search(
                    (rec.get("error") or {}).get("message") or ""))), cut)
        kept[rank] = recs[:cut]
        if cut < len(recs):
            reacted.add(rank)
    return kept, reacted


def _phase_of_hang(rec):
    phase, check = rec.get("phase"), rec.get("check")
    if phase in ("gather", "report"):
        return "teardown", "gather_records"
    return phase, check


def _vanished(per_rank, unfinished, reported, stacks, reacted=()):
    """The ranks that died with their watchers, the host's whole tree killed or the host
    gone, where a peer's error shows it.

    Such a rank says nothing at its end: no hang record from its watcher, no SIGTERM
    stack dump, no failed final barrier. Neither does a rank behind a cut link, whose
    watcher's word cannot come, so silence alone proves nothing. What tells the two
    apart is a surviving rank's error naming one of the silent ranks' host addresses
    (its setup.master_addr pre-check's): a connection to it was closed or reset, which
    a cut link does not do. Ranks still waiting in a collective then only reacted:
    their reads from the dead host fail at once, but one waiting on a live peer that
    is slow to leave waits out its deadline.
    """
    silent = [r for r in unfinished if per_rank.get(r) and r not in reported
              and r not in stacks and r not in reacted
              and not any(x["t"] == "teardown" for x in per_rank[r])]
    errors = [(rec.get("error") or {}).get("message") or "" for r, recs in per_rank.items()
              if r not in silent for rec in recs]
    errors = [e for e in errors if _PEER_ENDED.search(e)]
    # an address a surviving rank's host has too names no one (one machine's "hosts")
    shared = {a for r, recs in per_rank.items() if r not in silent
              for a in _host_addresses(recs)}
    return [r for r in silent if any(_names_address(e, a) for e in errors
                                     for a in _host_addresses(per_rank[r]) if a not in shared)]


def _names_address(text, address):
    """Does ``text`` name ``address`` whole ('[10.0.0.2]:4791', not '10.0.0.21')?"""
    return re.search(r"(?<![\w.:])%s(?!\.?\w)" % re.escape(address), text) is not None


def _host_addresses(recs):
    """A rank's host's own addresses, loopback aside (its setup.master_addr pre-check)."""
    return sorted({a for rec in recs if rec["t"] == "check" and rec.get("probe") == "setup"
                   and rec.get("check") == "master_addr"
                   for a in (rec.get("data") or {}).get("local") or ()
                   if not is_loopback(a)})


def _died_after_setup(per_rank, unfinished, stacks):
    """Did every setup that failed fail of a peer's connection closed or reset, after a
    rank whose setup had passed then died silent (no hang record, no SIGTERM stack dump,
    no teardown record)? gloo's init on a loaded host can still be connecting when a
    peer that finished its own has got into its first check and died there: the init
    fails with 'Connection closed by peer ... typically caused by a remote worker
    crashing' (a full suite's run blamed that setup, rank 0's, for rank 1's os._exit)."""
    errors = {r: ((rec.get("error") or {}).get("message") or "", rec["time"])
              for r in unfinished for rec in per_rank.get(r, [])
              if rec["t"] == "setup" and rec.get("outcome") == "failed"}
    if not all(_PEER_ENDED.search(message) for message, _ in errors.values()):
        return False
    first = min(when for _, when in errors.values())
    return any(
        r not in errors and r not in stacks
        and any(x["t"] == "setup" and x.get("outcome") == "passed" and x["time"] <= first
                for x in per_rank.get(r, []))
        and not any(x["t"] in ("hang", "teardown") for x in per_rank.get(r, []))
        for r in unfinished)


def _abort(per_rank, stacks, world, timeout, reacted=()):
    hangs = [(rank, rec) for rank, recs in per_rank.items() for rec in recs
             if rec["t"] == "hang"]
    unfinished = [r for r in range(world)
                  if not any(rec["t"] == "bye" for rec in per_rank.get(r, []))]
    if not hangs and not unfinished:
        return None
    info = {}
    for rank in range(world):
        recs = per_rank.get(rank, [])
        tracker = replay(recs)
        info[rank] = {"exit_code": None, "signal": None, "stderr_tail": None,
                      "stack": stacks.get(rank), "last_record": recs[-1] if recs else None,
                      "phase": tracker.phase, "check": tracker.check,
                      "stopped_by": "the launcher", "killed_by_envcheck": False}
        if not recs:
            info[rank]["stderr_tail"] = "no records from rank %d: copy its node's --out " \
                                        "directory here, or use a shared --out" % rank
    waited = None
    # The earliest failure is the root: ranks whose init_process_group failed leave
    # their peers waiting in theirs until the deadline (a peer host with a wrong
    # GLOO_SOCKET_IFNAME): those hangs are consequences.
    # A rank that skipped init_process_group because another rank's pre-check failed
    # is a consequence too: the rank whose own pre-check failed is the root.
    failed = [((rec.get("error") or {}).get("type") == PEER_PRECHECK_FAILED, rec["time"], r)
              for r in unfinished for rec in per_rank.get(r, [])
              if rec["t"] == "setup" and rec.get("outcome") == "failed"]
    if failed and _died_after_setup(per_rank, unfinished, stacks):
        failed = []  # consequences of a peer's death: a crash (below)
    for r, h in hangs:
        info[r]["phase"], info[r]["check"] = _phase_of_hang(h)
    reported = {r for r, _ in hangs}
    vanished = _vanished(per_rank, unfinished, reported, stacks, reacted)
    if failed:
        kind, rank = "setup_failed", min(failed)[2]
    elif hangs and vanished and all(h.get("in_collective") for _, h in hangs):
        kind = "crash"
        rank = blame.crash_root([blame.Casualty(r, False, per_rank[r][-1]["time"])
                                 for r in vanished])
    elif hangs:
        kind = "hang"
        # A rank's watcher writes its hang record at its deadline (plus a grace when it
        # waits in a collective): the record's time is that deadline. A rank that left
        # no hang record either was torn down first (its SIGTERM stack shows where) or
        # left nothing at all (stopped, or killed): a suspect too.
        suspects = [blame.Suspect(r, h.get("in_collective"), h["time"]) for r, h in hangs]
        for r in unfinished:
            if r not in reported and per_rank.get(r):
                suspects.append(blame.Suspect(
                    r, r in reacted or blame.waiting_in_distributed(stacks.get(r)),
                    replay(per_rank[r]).started + timeout))
        rank = blame.hang_root(suspects)
        waited = next((h.get("waited_s") for r, h in hangs if r == rank), None)
        if waited is None:  # silent: from its last phase change to the job's last word
            last = max(rec["time"] for recs in per_rank.values() for rec in recs)
            waited = max(0.0, last - replay(per_rank[rank]).started)
    else:
        if all(r in stacks for r in unfinished):
            # Every rank left the stack dump of a SIGTERM: none died on its own, the
            # launcher terminated them all (torchrun itself got SIGTERM, scancel ...).
            return Abort(AbortKind.INTERRUPTED, min(unfinished), info[min(unfinished)]["phase"],
                         info, signum=signal.SIGTERM)
        kind = "crash"
        # Torn-down ranks dumped their stacks on SIGTERM, and a rank whose final
        # barrier failed reacted to a peer; the one that died did neither.
        rank = blame.crash_root([blame.Casualty(
            r, r in stacks or any(x["t"] == "teardown" for x in per_rank.get(r, [])),
            per_rank[r][-1]["time"] if per_rank.get(r) else float("inf"))
            for r in unfinished])
    return Abort(kind, rank, info[rank]["phase"], info, waited_s=waited)


def _crash_detail(abort):
    """No supervisor saw the root rank exit: say what is known instead of a code."""
    abort.ranks[abort.root_rank]["how"] = (
        "stopped without a hang record or a SIGTERM stack dump: it crashed or was killed "
        "(its exit code is in the launcher's log)")


def _duration(per_rank, hosts):
    """(the job's length, when rank 0's host saw it begin): each host's span by its own
    clock, the longest. Records carry each host's wall clock, and one host's clock an
    hour ahead must not make a 5 s job last an hour (its offset is the clock check's)."""
    spans = {}
    for rank, recs in per_rank.items():
        times = [r["time"] for r in recs
                 if isinstance(r.get("time"), (int, float)) and not isinstance(r["time"], bool)]
        if times:
            key = hosts.get(rank, "rank %d" % rank)
            lo, hi = spans.get(key, (min(times), max(times)))
            spans[key] = (min(lo, min(times)), max(hi, max(times)))
    if not spans:
        raise UsageError("no record holds a time: these are not records envcheck wrote")
    zero = hosts.get(0, "rank 0")
    first = spans[zero][0] if zero in spans else min(lo for lo, _ in spans.values())
    return max(hi - lo for lo, hi in spans.values()), first


def build(path):
    per_rank, stacks, torn = load(path)
    launch = _launch_record(per_rank)
    per_rank, stale = _current(per_rank, launch)
    world = _world(launch)
    plan_in = launch.get("plan") or {}
    probes = list(plan_in.get("probes") or [])
    timeout = float(plan_in.get("timeout") or 60.0)
    hosts = merge.hosts([Attempt([], 0, per_rank)])
    per_rank, reacted = _before_the_kill(per_rank, hosts)
    abort = _abort(per_rank, stacks, world, timeout, reacted)
    seconds, first = _duration(per_rank, hosts)
    start = launch.get("started") if isinstance(launch.get("started"), (int, float)) \
        else first
    attempt = Attempt([{"name": p} for p in probes], int(launch.get("master_port") or 0),
                      {r: per_rank.get(r, []) for r in range(world)}, abort, seconds)
    if abort and abort.kind == "crash":
        _crash_detail(abort)
    checks, env, ranks = merge.results([attempt], probes, world, timeout)
    checks = follow_up.fixed_world_size(checks, probes, world, launch.get("launcher"))
    host_names = sorted(set(merge.hosts([attempt]).values()))
    notes = ["started by %s: %d ranks on %d host(s) (%s); records from %s" % (
        launch.get("launcher"), world, len(host_names), ", ".join(host_names), path)]
    if torn:
        notes.append(merge.torn_note(torn))
    missing = [r for r in range(world) if not per_rank.get(r)]
    if missing:
        notes.append("no records from rank(s) %s" % ", ".join(map(str, missing)))
    if stale:
        notes.append("ignored records of another job: rank(s) %s" % ", ".join(map(str, stale)))
    plan = {"nproc": world, "backend": plan_in.get("backend") or "auto", "probes": probes,
            "timeout": timeout, "python": launch.get("python") or "?",
            "python_version": launch.get("python_version"),
            "options": plan_in.get("options") or {}, "notes": notes,
            "launcher": launch.get("launcher"), "run_id": launch.get("run_id")}
    created = datetime.datetime.fromtimestamp(start, datetime.timezone.utc)
    return Report(envcheck_version=__version__,
                  created=created.isoformat(timespec="seconds"), plan=plan,
                  environment=env, ranks=ranks, checks=checks,
                  duration_s=round(seconds, 3),
                  interrupted=merge.abort_signal(abort) if abort and
                  abort.kind == "interrupted" else None,
                  attempts=merge.attempts_summary([attempt]))
