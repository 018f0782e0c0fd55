"""The report of a torchrun / srun run, built from the ranks' records (no torch here).

Ranks started by a launcher (``python -m envcheck.worker.launched``) leave record streams
and stack files; this turns them into the same ``Report`` as ``envcheck run`` by
replaying them as one supervisor *attempt* and handing that to ``merge``:

- ``--records DIR/records.jsonl``: what rank 0 gathered from every rank at the end;
- ``--records DIR``: each rank's own ``records-rank*.jsonl`` (and ``stacks-rank*.txt``),
  when the job was torn down before rank 0 could gather (a hang, a crash), with the
  directories of every node copied together, or a shared ``--out``.

The supervisor is not there to watch, so the abort is read from what the ranks left:
a ``hang`` record from a rank's watchdog (the root cause is a rank that was *not*
waiting inside torch.distributed, else the first to report); else a rank without ``bye``
that left no SIGTERM stack dump — it died on its own, while the others were torn down by
the launcher.
"""

import datetime
import glob
import json
import os
import re

from .. import __version__
from . import merge
from ..core.errors import UsageError
from ..report.model import Report
from .supervisor import Abort, Attempt
from ..worker.launched import MERGED_RECORDS

_RANK_FILE = re.compile(r"records-rank(\d+)\.jsonl$")


def _parse_lines(text, where):
    records = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                continue  # the last line of a rank killed mid-write
            raise UsageError("%s line %d is not a JSON record" % (where, i + 1)) from None
        if not isinstance(rec, dict) or "t" not in rec or "rank" not in rec:
            raise UsageError("%s line %d is not an envcheck record" % (where, i + 1))
        records.append(rec)
    return records


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as exc:
        raise UsageError("cannot read %s: %s" % (path, exc.strerror)) from None


def load(path):
    """rank -> records, rank -> stacks text, and the directory they came from."""
    if os.path.isdir(path):
        directory = path
        files = {int(m.group(1)): os.path.join(path, name)
                 for name in os.listdir(path) for m in [_RANK_FILE.match(name)] if m}
        if not files:
            hint = " (rank 0 wrote %s there)" % MERGED_RECORDS if os.path.exists(
                os.path.join(path, MERGED_RECORDS)) else ""
            raise UsageError("%s holds no records-rank*.jsonl%s" % (path, hint))
        per_rank = {r: _parse_lines(_read(p), p) for r, p in files.items()}
    elif os.path.isfile(path):
        directory = os.path.dirname(os.path.abspath(path))
        per_rank = {}
        for rec in _parse_lines(_read(path), path):
            per_rank.setdefault(int(rec["rank"]), []).append(rec)
        if not per_rank:
            raise UsageError("%s holds no records" % path)
    else:
        raise UsageError("%s: no such file or directory" % path)
    stacks = {}
    for p in glob.glob(os.path.join(directory, "stacks-rank*.txt")):
        m = re.search(r"stacks-rank(\d+)\.txt$", p)
        text = _read(p).strip()
        if m and text:
            stacks[int(m.group(1))] = text
    return per_rank, stacks


def _replay(records):
    """(phase, check) a rank was in when its records stop, as the supervisor tracks it."""
    phase, check = "startup", None
    for rec in records:
        kind = rec["t"]
        if kind == "setup_start":
            phase = "setup"
        elif kind == "probe_start":
            phase, check = "probe:" + rec["probe"], None
        elif kind == "check_start":
            check = rec["check"]
        elif kind == "check":
            check = None
        elif kind == "probe_end":
            phase, check = "between", None
        elif kind == "teardown_start":
            phase = "teardown"
        elif kind == "bye":
            phase = "done"
    return phase, check


def _launch_record(per_rank):
    for rank in sorted(per_rank):
        rec = next((r for r in per_rank[rank] if r["t"] == "launch"), None)
        if rec:
            return rec
    raise UsageError("no 'launch' record: these are not records of "
                     "'python -m envcheck.worker.launched'")


def _current(per_rank, launch):
    """Only this job's ranks: a reused --out may hold files of an earlier, bigger job."""
    world = int(launch["world_size"])
    kept, stale = {}, []
    for rank, recs in sorted(per_rank.items()):
        mine = next((r for r in recs if r["t"] == "launch"), None)
        if rank >= world or (mine and (mine.get("run_id"), mine.get("world_size")) !=
                             (launch.get("run_id"), launch.get("world_size"))):
            stale.append(rank)
        else:
            kept[rank] = recs
    return kept, stale


def _phase_of_hang(rec):
    phase, check = rec.get("phase"), rec.get("check")
    if phase in ("gather", "report"):
        return "teardown", "gather_records"
    return phase, check


def _abort(per_rank, stacks, world):
    hangs = [(rank, rec) for rank, recs in per_rank.items() for rec in recs
             if rec["t"] == "hang"]
    unfinished = [r for r in range(world)
                  if not any(rec["t"] == "bye" for rec in per_rank.get(r, []))]
    if not hangs and not unfinished:
        return None
    info = {}
    for rank in range(world):
        recs = per_rank.get(rank, [])
        phase, check = _replay(recs)
        info[rank] = {"exit_code": None, "signal": None, "stderr_tail": None,
                      "stack": stacks.get(rank), "last_record": recs[-1] if recs else None,
                      "phase": phase, "check": check, "stopped_by": "the launcher",
                      "killed_by_envcheck": False}
        if not recs:
            info[rank]["stderr_tail"] = "no records from rank %d: copy its node's --out " \
                                        "directory here, or use a shared --out" % rank
    waited = None
    if hangs:
        kind = "hang"
        # A rank blocked in a collective waits for a peer; the peer is the cause.
        rank, rec = min(hangs, key=lambda h: (bool(h[1].get("in_collective")), h[1]["time"]))
        for r, h in hangs:
            info[r]["phase"], info[r]["check"] = _phase_of_hang(h)
        waited = rec.get("waited_s")
    else:
        failed = [(rec["time"], r) for r in unfinished for rec in per_rank.get(r, [])
                  if rec["t"] == "setup" and rec.get("outcome") == "failed"]
        if failed:
            kind, rank = "setup_failed", min(failed)[1]
        else:
            kind = "crash"
            # Torn-down ranks dumped their stacks on SIGTERM; the one that died did not.
            silent = [r for r in unfinished if per_rank.get(r) and r not in stacks]
            pool = silent or [r for r in unfinished if per_rank.get(r)] or unfinished
            rank = min(pool, key=lambda r: (per_rank[r][-1]["time"] if per_rank.get(r)
                                            else float("inf"), r))
    return Abort(kind, rank, info[rank]["phase"], info, waited_s=waited)


def _with_hosts(check, hosts):
    """Name the host next to the rank, so a multi-node table says where."""
    if check.root_rank is None:
        return
    detail = check.detail or ""
    m = re.match(r"rank ([\d,]+)\b", detail)  # merge's "rank 1,3: ..." or "rank 1 could not"
    ranks = [int(r) for r in m.group(1).split(",")] if m else [check.root_rank]
    rest = detail[m.end():] if m else ": " + detail
    where = ", ".join("%d on %s" % (r, hosts.get(r) or "?") for r in ranks)
    check.detail = "rank %s%s" % (where, rest)


def _crash_detail(check, abort):
    entry = check.ranks.get(str(abort.root_rank))
    if entry and entry.get("outcome") == "crash":
        where = entry.get("detail", "").rsplit(" in ", 1)[-1]
        entry["detail"] = ("stopped without a hang record or a SIGTERM stack dump in %s: "
                           "it crashed or was killed (its exit code is in the launcher's "
                           "log)" % where)
        check.detail = entry["detail"]


def build(path):
    per_rank, stacks = load(path)
    launch = _launch_record(per_rank)
    per_rank, stale = _current(per_rank, launch)
    world = int(launch["world_size"])
    plan_in = launch.get("plan") or {}
    probes = list(plan_in.get("probes") or [])
    timeout = float(plan_in.get("timeout") or 60.0)
    abort = _abort(per_rank, stacks, world)
    times = [rec["time"] for recs in per_rank.values() for rec in recs if "time" in rec]
    start = launch.get("started") or min(times)
    attempt = Attempt([{"name": p} for p in probes], int(launch.get("master_port") or 0),
                      {r: per_rank.get(r, []) for r in range(world)}, abort,
                      max(times) - start)
    checks = merge.merge([attempt], probes, world, timeout)
    env, ranks = merge.environment([attempt])
    hosts = {r["rank"]: r.get("host") for r in ranks}
    for r, recs in per_rank.items():  # ranks that never got to their env record
        hello = next((x for x in recs if x["t"] == "hello"), None)
        if r not in hosts and hello:
            hosts[r] = hello.get("host")
    for c in checks:
        if abort and abort.kind == "crash":
            _crash_detail(c, abort)
        _with_hosts(c, hosts)
    host_names = sorted({h for h in hosts.values() if h})
    notes = ["started by %s: %d ranks on %d host(s) (%s); records from %s" % (
        launch.get("launcher"), world, len(host_names), ", ".join(host_names), path)]
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
                  duration_s=round(max(times) - start, 3), interrupted=None,
                  attempts=merge.attempts_summary([attempt]))
