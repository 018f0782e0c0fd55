"""Per-rank records of every attempt → one ``CheckResult`` per check.

A check's outcome is the worst outcome of any rank (see ``outcomes.SEVERITY``); its
detail, advice and error come from the root-cause rank: the rank the supervisor blamed
for a hang or crash, otherwise the rank whose failure was recorded first. Setup is
reported as the pseudo-probe ``setup`` (``import_torch``, ``init_process_group``); a
probe that produced no check at all (never reached, or stuck outside any check) is
reported as its ``run`` check.
"""

import re

from . import addresses, timing
from ..core import blame
from ..core.outcomes import worst
from ..core.text import first_line, parse_rank_numbers, rank_numbers, rank_set, shorten
from ..report.model import CheckResult

SETUP = "setup"


def _rank_entry(rec):
    entry = {
        "outcome": rec["outcome"],
        "seconds": rec.get("seconds"),
        "detail": rec.get("detail") or "",
        "advice": rec.get("advice"),
        "error": rec.get("error"),
        "data": rec.get("data") or {},
        "time": rec.get("time"),
    }
    if rec.get("stack"):  # a hang the probe saw itself (worker/context CheckHung)
        entry["stack"] = rec["stack"]
        entry["where"] = blame.whereabouts(rec["stack"])
    return entry


def _abort_entry(abort, rank, info, timeout):
    kind = abort.kind
    entry = {"outcome": kind if kind in ("hang", "crash") else "skipped", "seconds": None,
             "detail": "", "advice": None, "error": None, "data": {},
             "exit_code": info.get("exit_code"), "signal": info.get("signal"),
             "stderr_tail": info.get("stderr_tail"), "stack": info.get("stack"),
             "last_record": info.get("last_record")}
    where = info.get("check") or info.get("phase")
    # Under torchrun/srun (envcheck.run.launcher) the launcher stops the other ranks.
    who = info.get("stopped_by") or "envcheck"
    entry["where"] = blame.whereabouts(info.get("stack"))
    if info.get("stopped"):
        entry["where"] = {"at": None, "waiting_in": None, "stopped": True}
    if kind == "hang":
        if rank == abort.root_rank and abort.waiting:  # a rank that never started
            entry["seconds"] = abort.waited_s
            entry["detail"] = ("rank %d: no progress for %.1f s in %s; %s waited for it at "
                               "the rendezvous past the timeout (%g s)%s" % (
                                   rank, abort.waited_s or 0, where, rank_set(abort.waiting),
                                   abort.limit_s or timeout,
                                   _location(entry["where"], "; ")))
        elif rank == abort.root_rank:
            entry["seconds"] = abort.waited_s
            limit = abort.limit_s or timeout
            entry["detail"] = "rank %d: no progress for %.1f s (%s %g s) in %s%s" % (
                rank, abort.waited_s or 0, "timeout" if limit == timeout else
                "startup timeout", limit, where, _location(entry["where"], "; "))
        else:
            entry["detail"] = "stopped by %s while in %s after rank %d hung%s" % (
                who, where, abort.root_rank, _location(entry["where"], "; it was "))
    elif kind == "crash":
        if rank == abort.root_rank:
            how = info.get("how") or (("killed by %s" % info["signal"]) if info.get("signal")
                                      else ("exited with code %s" % info.get("exit_code")))
            entry["detail"] = "rank %d %s in %s" % (rank, how, where)
        else:
            entry["detail"] = "stopped by %s while in %s after rank %d crashed" % (
                who, where, abort.root_rank)
    elif kind == "interrupted":
        entry["detail"] = ("terminated by %s (%s) while in %s" % (who, abort_signal(abort), where)
                           if info.get("stopped_by") else
                           "interrupted (%s) while in %s" % (abort_signal(abort), where))
        entry["interrupted"] = True
    else:  # setup_failed: ranks still waiting for the one whose setup failed
        entry["detail"] = "stopped by %s after rank %d failed to set up" % (
            who, abort.root_rank)
    return entry


def _location(where, lead):
    """'; waiting in all_reduce (distributed_c10d.py:2806 all_reduce)', '; at x.py:8 f',
    or a stopped process: where a rank was when the run stopped it."""
    if not where:
        return ""
    if where.get("stopped"):
        return ("%sstopped (state T: SIGSTOP, Ctrl-Z or a debugger), so it showed no stack "
                "and was killed at once (SIGKILL)" % lead)
    if where.get("waiting_in"):
        return "%swaiting in %s (%s)" % (lead, where["waiting_in"], where["at"])
    return "%sat %s" % (lead, where["at"])


def abort_signal(abort):
    import signal
    return signal.Signals(abort.signum).name if abort.signum else "signal"


def _merge(probe, check, ranks, root_rank=None):
    cut = [r for r, e in ranks.items() if e.get("interrupted")]
    if cut:
        # Cut short on some rank: what the others saw proves nothing either way (a
        # half-run check that "passed" would otherwise be judged as fixed).
        return CheckResult(probe=probe, check=check, outcome="skipped",
                           detail=ranks[min(cut)]["detail"],
                           ranks={str(r): e for r, e in sorted(ranks.items())})
    outcome = worst(e["outcome"] for e in ranks.values())
    if root_rank is None or root_rank not in ranks \
            or ranks[root_rank]["outcome"] != outcome.value:
        candidates = [r for r, e in ranks.items() if e["outcome"] == outcome.value]
        # A rank whose failure is the others' cause says so (data.cause: the store's
        # host, whose port is taken): its story, whenever it wrote it.
        causes = [r for r in candidates if (ranks[r].get("data") or {}).get("cause")]
        candidates = causes or candidates
        # A failure's story comes from the rank that failed first; otherwise rank 0's
        # words, so the same run always reads the same.
        root_rank = min(candidates, key=lambda r: (ranks[r].get("time") or 0, r)) \
            if outcome.is_bad else min(candidates)
        # Ranks that failed with the same words (a host's ranks, a verdict gathered from
        # every rank): the lowest of them, whichever wrote its record first.
        root_rank = min(r for r in candidates
                        if ranks[r].get("detail") == ranks[root_rank].get("detail"))
    root = ranks[root_rank]
    detail = root["detail"]
    differing = sorted(r for r, e in ranks.items() if e["outcome"] != outcome.value)
    if outcome.is_bad and len(ranks) > 1:
        bad = sorted(r for r, e in ranks.items() if e["outcome"] == outcome.value)
        # A hang's or crash's own words already start with its rank ("rank 1 exited").
        if differing and not re.match(r"rank %d\b" % root_rank, detail):
            detail = "%s: %s" % (rank_set(bad), detail)
    seconds = [e["seconds"] for e in ranks.values() if e.get("seconds") is not None]
    return CheckResult(
        probe=probe, check=check, outcome=outcome.value,
        seconds=round(max(seconds), 6) if seconds else None, detail=detail,
        # Advice is for the user to act on: only carried where something went wrong.
        advice=root.get("advice") if outcome.is_bad else None, error=root.get("error"),
        root_rank=root_rank if outcome.is_bad else None,
        ranks={str(r): e for r, e in sorted(ranks.items())})


class _Collector:
    def __init__(self, timeout):
        self.timeout = timeout
        self.order = []
        self.per_check = {}  # (probe, check) -> {rank: entry}
        self.roots = {}

    def add(self, probe, check, rank, entry):
        key = (probe, check)
        if key not in self.per_check:
            self.order.append(key)
            self.per_check[key] = {}
        self.per_check[key][rank] = entry

    def has_probe(self, probe):
        return any(p == probe for p, _ in self.order)

    def results(self):
        return [_merge(p, c, self.per_check[(p, c)], self.roots.get((p, c)))
                for p, c in self.order]


def _setup_checks(col, attempt, nproc):
    abort = attempt.abort
    for rank in range(nproc):
        recs = attempt.records.get(rank, [])
        hello = next((r for r in recs if r["t"] == "hello"), None)
        setup = next((r for r in recs if r["t"] == "setup"), None)
        info = abort.ranks.get(rank, {}) if abort else {}
        if hello:
            col.add(SETUP, "import_torch", rank, {
                "outcome": "passed", "seconds": hello.get("torch_import_s"),
                "detail": "%.2f s" % hello.get("torch_import_s", 0), "advice": None,
                "error": None, "data": {}, "time": hello["time"]})
        elif abort:
            col.add(SETUP, "import_torch", rank, _import_failure(abort, rank, info, col))
        for rec in recs:  # the rendezvous pre-checks, before init_process_group
            if rec["t"] == "check" and rec.get("probe") == SETUP:
                col.add(SETUP, rec["check"], rank, _rank_entry(rec))
        if setup:
            entry = _rank_entry(setup)
            err = setup.get("error") or {}
            if err.get("type") in addresses.NOT_ATTEMPTED:
                # A pre-check failed (here, or on another rank): that check says why.
                entry.update(outcome="skipped", detail=err.get("message") or "",
                             advice=None, error=None)
            elif setup["outcome"] == "passed":
                entry["detail"] = "%s in %.3f s" % (setup.get("backend"), setup["seconds"])
                entry["data"] = dict(entry["data"], backend=setup.get("backend"))
            else:
                err = setup.get("error") or {}
                entry["detail"] = "%s: %s" % (err.get("type"), _first_line(err.get("message")))
                entry["advice"] = _setup_advice(err)
            col.add(SETUP, "init_process_group", rank, entry)
        elif hello and abort and info.get("phase") in ("setup", "startup"):
            col.add(SETUP, "init_process_group", rank,
                    _abort_entry(abort, rank, info, col.timeout))
    addresses.compare_master_addr(col.per_check.get((SETUP, "master_addr")), hosts_of(attempt))
    if abort and abort.phase in ("startup", "setup"):
        col.roots[(SETUP, "import_torch" if abort.phase == "startup"
                   else "init_process_group")] = abort.root_rank


def _slowest_rank(check):
    """A setup step's detail from the same number as its time column: a check's seconds
    are its slowest rank's, so the detail names that rank (and the fastest), rather than
    rank 0's own time, which disagreed with the column (3.61 s against 2.98 s)."""
    timed = {int(r): e["seconds"] for r, e in (check.ranks or {}).items()
             if e.get("seconds") is not None}
    if check.outcome != "passed" or not timed:
        return
    slowest = max(sorted(timed), key=timed.__getitem__)
    text = "%.2f s" % timed[slowest]
    if len(timed) > 1:
        text += " (rank %d, slowest of %d; fastest %.2f s)" % (
            slowest, len(timed), min(timed.values()))
    backend = (check.ranks[str(slowest)].get("data") or {}).get("backend")
    check.detail = "%s, %s" % (backend, text) if backend else text


def _outside_probes(col, attempt):
    """A hang or crash after the last probe (final barrier) or between two probes."""
    abort = attempt.abort
    if not abort or abort.phase not in ("teardown", "between"):
        return
    check = "final_barrier" if abort.phase == "teardown" else "between_probes"
    for rank, info in abort.ranks.items():
        if info.get("phase") in ("teardown", "between"):
            col.add(SETUP, check, rank, _abort_entry(abort, rank, info, col.timeout))
    col.roots[(SETUP, check)] = abort.root_rank


def _import_failure(abort, rank, info, col):
    entry = _abort_entry(abort, rank, info, col.timeout)
    tail = (info.get("stderr_tail") or "").strip()
    if abort.kind == "crash" and rank == abort.root_rank and tail:
        line = meaningful_line(tail)
        how = ("killed by %s" % info["signal"]) if info.get("signal") else None
        entry["detail"] = "rank %d could not start: %s" % (rank, shorten(line or how or "", 200))
        entry["error"] = {"type": line.split(":")[0] if line else info.get("signal"),
                          "message": line, "traceback": tail}
        entry["advice"] = _start_advice(tail)
    return entry


_FRAME_LINE = re.compile(r'^\s*(File "|\^+$|~+$|Traceback \(most recent call last\)|'
                         r'During handling of the above|The above exception was)')
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b|"
                         r"terminate called|Fatal Python error|Segmentation fault|Aborted|"
                         r"Killed)")


def meaningful_line(text):
    """The line of a rank's stderr that says what went wrong: the last error or fatal
    line, never a traceback frame ('File "<frozen runpy>", line 198')."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line.strip()):
            return line.strip()
    for line in reversed(lines):
        if not _FRAME_LINE.match(line):
            return line.strip()
    return lines[-1].strip() if lines else ""


def _start_advice(tail):
    if re.search(r"bad_alloc|MemoryError|Cannot allocate memory|failed to map segment|"
                 r"out of memory", tail):
        return ("the rank ran out of memory while starting: importing torch maps large "
                "libraries; check the memory limit on this process (ulimit -v, the "
                "container's or cgroup's limit) and what else holds memory")
    if re.search(r"ModuleNotFoundError|No module named|undefined symbol|cannot open shared "
                 r"object", tail):
        return "the interpreter's torch does not import: reinstall it (and its CUDA libraries)"
    return "the rank died while starting: run the interpreter with -c 'import torch' to see why"


# init_process_group's advice where its error says nothing more: explain.diagnose puts
# the cause the error's text names in its place (on an H200: "invalid device ordinal").
SETUP_FALLBACK = ("init_process_group failed: check MASTER_ADDR/MASTER_PORT reachability "
                  "and that every rank uses the same WORLD_SIZE")


def _setup_advice(err):
    text = "%s %s" % (err.get("type"), err.get("message"))
    if "did not report their pre-checks" in text:
        return ("look at the output of the host those ranks run on: envcheck printed there "
                "which pre-check failed and its fix (most often a firewall between the "
                "hosts, or MASTER_ADDR resolving elsewhere there); its records: envcheck "
                "report --records DIR with that host's --out directory. Ranks that were "
                "only slow to start (importing torch from a slow filesystem) need a "
                "longer --timeout")
    if "Address already in use" in text:
        return "the rendezvous port is taken: set MASTER_PORT to a free port"
    if "NCCL" in text:
        return ("NCCL could not initialise: check the driver with nvidia-smi and rerun "
                "with NCCL_DEBUG=INFO, or try --backend gloo to separate NCCL from the rest")
    return SETUP_FALLBACK


def _first_line(text):
    return first_line(text)


def _probe_checks(col, attempt):
    abort = attempt.abort
    for entry in attempt.probes:
        probe = entry["name"]
        started = {}  # rank -> set of started checks
        for rank, recs in sorted(attempt.records.items()):
            for rec in recs:
                if rec.get("probe") != probe:
                    continue
                if rec["t"] == "check":
                    col.add(probe, rec["check"], rank, _rank_entry(rec))
                elif rec["t"] == "check_start":
                    started.setdefault(rank, set()).add(rec["check"])
        if not abort or abort.phase != "probe:" + probe:
            continue
        in_probe = {r: i for r, i in abort.ranks.items() if i.get("phase") == "probe:" + probe}
        for rank, info in in_probe.items():
            check = info.get("check") or "run"
            col.add(probe, check, rank, _abort_entry(abort, rank, info, col.timeout))
            if rank == abort.root_rank:
                col.roots[(probe, check)] = rank
        if abort.root_rank not in in_probe:
            col.roots[(probe, "run")] = abort.root_rank


def _not_run_reason(attempts):
    last = attempts[-1].abort if attempts else None
    if last is None:
        return "not run"
    if last.kind == "interrupted":
        who = next((i.get("stopped_by") for i in last.ranks.values() if i.get("stopped_by")),
                   None)
        return ("not run: the ranks were terminated by %s (%s)" % (who, abort_signal(last))
                if who else "not run: envcheck was interrupted (%s)" % abort_signal(last))
    if last.phase == "startup":
        return "not run: the ranks did not start (see setup.import_torch)"
    return "not run: the process group could not be set up (see setup.init_process_group)"


def merge(attempts, planned, nproc, timeout):
    """Check results, in the order the ranks ran them, for the planned probe names."""
    col = _Collector(timeout)
    if attempts:
        _setup_checks(col, attempts[0], nproc)
    for i, attempt in enumerate(attempts):
        if i > 0:
            restarted_setup = _restart_setup_failure(attempt)
            if restarted_setup:
                for entry in attempt.probes:
                    for rank in range(nproc):
                        col.add(entry["name"], "run", rank, dict(restarted_setup))
                continue
        _probe_checks(col, attempt)
    if attempts:
        _outside_probes(col, attempts[-1])
    reason = _not_run_reason(attempts)
    for name in planned:
        if not col.has_probe(name):
            for rank in range(nproc):
                col.add(name, "run", rank, {"outcome": "skipped", "seconds": None,
                                            "detail": reason, "advice": None, "error": None,
                                            "data": {}})
    checks = col.results()
    for check in checks:
        if check.probe == SETUP and check.check in ("import_torch", "init_process_group"):
            _slowest_rank(check)
    return checks


def _restart_setup_failure(attempt):
    """After a hang/crash, fresh ranks must set up again; say so if they could not."""
    abort = attempt.abort
    if abort is None or abort.phase.startswith("probe:"):
        return None
    return {"outcome": "failed" if abort.kind != "interrupted" else "skipped",
            "seconds": None,
            "detail": "not run: ranks restarted after an earlier hang or crash could not "
                      "%s (%s on rank %d)" % ("start" if abort.phase == "startup"
                                              else "set up the process group",
                                              abort.kind, abort.root_rank),
            "advice": None, "error": None, "data": {}}


def environment(attempts):
    """Rank 0's environment and every rank's identity, from the first attempt."""
    env, ranks = {}, []
    for attempt in attempts:
        for rank, recs in sorted(attempt.records.items()):
            rec = next((r for r in recs if r["t"] == "env"), None)
            if rec is None:
                continue
            if rec.get("environment") and not env:
                env = rec["environment"]
            if len(ranks) <= rank:
                ranks.append({k: rec.get(k) for k in ("host", "pid", "local_rank", "device",
                                                       "backend", "cuda_visible_devices")}
                             | {"rank": rank})
        if env:
            break
    return env, ranks


def attempts_summary(attempts):
    out = []
    for a in attempts:
        item = {"probes": [p["name"] for p in a.probes], "port": a.port,
                "seconds": round(a.seconds, 3), "abort": None}
        if a.world_size:  # a follow-up phase at its own world size
            item["world_size"] = a.world_size
        if a.abort:
            item["abort"] = a.abort.summary()
        item["timing"] = timing.of_attempt(a)
        out.append(item)
    return out


def hosts_of(attempt):
    return hosts([attempt])


def hosts(attempts):
    """rank -> host, from the ranks' env records, else their hello (a rank that never
    got as far as its env record)."""
    found = {}
    for attempt in attempts:
        for rank, recs in attempt.records.items():
            for rec in recs:
                if rec["t"] in ("env", "hello") and rec.get("host") and rank not in found:
                    found[rank] = rec["host"]
    return found


_RANKS_PREFIX = re.compile(r"ranks? ([\d,–]+)(?![\d,–])")


def name_hosts(checks, where):
    """'ranks 0–3: ...' becomes 'ranks 0–1 on node-a, 2–3 on node-b: ...' when the ranks
    span several hosts."""
    if len(set(where.values())) < 2:
        return
    for check in checks:
        if check.root_rank is None:
            continue
        detail = check.detail or ""
        m = _RANKS_PREFIX.match(detail)  # "ranks 1,3: ..." or "rank 1 could not ..."
        ranks = parse_rank_numbers(m.group(1)) if m else [check.root_rank]
        rest = detail[m.end():] if m else ": " + detail
        by_host = {}
        for r in ranks:
            by_host.setdefault(where.get(r) or "?", []).append(r)
        check.detail = "%s %s%s" % ("rank" if len(ranks) == 1 else "ranks", "; ".join(
            "%s on %s" % (rank_numbers(rs), host) for host, rs in by_host.items()), rest)


def torn_note(count):
    return ("%d record line%s could not be read (a rank killed while writing) and %s "
            "skipped" % (count, "s" if count != 1 else "", "were" if count != 1 else "was"))


def results(attempts, planned, nproc, timeout):
    """(checks, environment, ranks): what both drivers put in a report."""
    checks = merge(attempts, planned, nproc, timeout)
    env, ranks = environment(attempts)
    name_hosts(checks, hosts(attempts))
    return checks, env, ranks
