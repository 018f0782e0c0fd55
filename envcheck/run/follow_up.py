"""Follow-up phases: after the main run, fresh ranks at another world size.

A probe may declare follow-ups (``probes/spec.py``: ``FollowUp``): functions to run in a job of
another size once the main run is over, e.g. a checkpoint saved by N ranks loaded by N+1
and by 1. ``core.plan.follow_ups`` turns them into phases; here ``envcheck run`` runs
them:

- before the main run, each probe with a phase to run gets a *hand-off directory* (a
  run directory of this process, 0700, removed at the end, swept by a later run if this
  one was killed) in its plan entry; the probe's ranks see it as ``ctx.handoff`` and
  leave there what the follow-ups need;
- after it, each phase is one more call of the supervisor's ``supervise`` with its own
  world size and a plan of one entry (the follow-up function, ``ctx.phase`` telling it
  which check and the main run's world size). A phase is not started when the main run
  was interrupted, or its probe left nothing in the hand-off directory;
- its records are merged like any attempt's, at its own world size, and its checks are
  put after the probe's own. Its setup (import, init_process_group) is reported only
  when it failed, as the follow-up's check: the main run's setup is the run's setup.
"""

import contextlib
import os
import shutil

from ..core import plan as plan_mod
from ..probes import catalog
from ..launch import contain, signals as signals_mod
from ..core.errors import UsageError
from ..core.attempt import Abort, AbortKind, Attempt
from ..report.model import CheckResult
from . import merge
from .supervisor import supervise


@contextlib.contextmanager
def handoff(phases, rank_plan):
    """``rank_plan`` with a hand-off directory in the entry of every probe that has a
    follow-up to run; the directories are removed when the block ends."""
    dirs = {}
    try:
        for phase in phases:
            if phase["skip"] is None and phase["probe"] not in dirs:
                dirs[phase["probe"]] = contain.make_run_dir()
        entries = [dict(e, handoff=dirs[e["name"]]) if e["name"] in dirs else e
                   for e in rank_plan["probes"]]
        for phase in phases:
            if phase["probe"] in dirs:
                phase["entry"]["handoff"] = dirs[phase["probe"]]
        yield dict(rank_plan, probes=entries)
    finally:
        for path in dirs.values():
            shutil.rmtree(path, ignore_errors=True)


def _handed_on(path):
    try:
        return bool(os.listdir(path))
    except OSError:
        return False


def run(phases, main_attempts, interpreter, rank_plan, timeout, on_event=None,
        startup_timeout=None, notes=None):
    """Run the phases that can run; returns (checks, attempts) of every phase."""
    checks, attempts = [], []
    last = main_attempts[-1].abort if main_attempts else None
    with signals_mod.Noted() as signals:
        for phase in phases:
            reason = phase["skip"]
            interrupted = (last is not None and last.kind == "interrupted") or \
                signals.signum is not None
            if reason is None and interrupted:
                reason = "not run: envcheck was interrupted"
            elif reason is None and not _handed_on(phase["entry"]["handoff"]):
                reason = ("not run: the %d-rank run of %s handed nothing on (see its other "
                          "checks)" % (phase["saved_world_size"], phase["probe"]))
            if reason is not None:
                checks.extend(_skipped(phase, reason))
                continue
            plan = dict(rank_plan, probes=[phase["entry"]])
            if on_event:  # the live view: fresh ranks, another world size, one check
                on_event({"t": "phase", "probe": phase["probe"], "check": phase["check"],
                          "world_size": phase["world_size"]})
            got = supervise(interpreter, plan, phase["world_size"], on_event=on_event,
                            startup_timeout=startup_timeout, notes=notes)
            for attempt in got:
                attempt.world_size = phase["world_size"]
            attempts += got
            checks += phase_checks(phase, got, timeout)
            last = got[-1].abort if got else last
        if signals.signum is not None and (last is None or last.kind != "interrupted"):
            # Between two phases: no rank was running, the run still ends as interrupted.
            attempts.append(Attempt([], 0, {}, Abort(AbortKind.INTERRUPTED, 0, "startup", {},
                                                     signum=signals.signum)))
    return checks, attempts


def phase_checks(phase, attempts, timeout):
    """The phase's records as check results: its own check, plus its setup only where
    the setup failed (then as the follow-up's check, naming the world size)."""
    out = []
    where = "at %d rank(s): " % phase["world_size"]
    for result in merge.merge(attempts, [phase["probe"]], phase["world_size"], timeout):
        if result.probe == merge.SETUP:
            if result.outcome in ("passed", "skipped"):
                continue
            result.probe, result.check = phase["probe"], phase["check"]
            result.detail = where + (result.detail or "")
        elif result.check == "run":
            result.check = phase["check"]
            result.detail = where + (result.detail or "")
        out.append(result)
    # One result per check id: a setup failure and the "not run" it causes are one story.
    seen, unique = set(), []
    for result in out:
        if result.id not in seen:
            seen.add(result.id)
            unique.append(result)
    return unique


def _skipped(phase, reason):
    """The phase's checks, each skipped for ``reason``: it never ran."""
    return [CheckResult(probe=phase["probe"], check=check, outcome="skipped", detail=reason,
                        ranks={}) for check in (phase["check"],) + tuple(phase.get("also", ()))]


def place(checks, extra):
    """Each follow-up check right after the last check of its probe (or at the end)."""
    out = list(checks)
    for result in extra:
        last = max((i for i, c in enumerate(out) if c.probe == result.probe), default=None)
        out.insert(len(out) if last is None else last + 1, result)
    return out


def fixed_world_size(checks, probe_names, world_size, launcher):
    """Launcher mode: torchrun/srun fixed the world size, so every follow-up of the probes
    that ran is reported skipped, saying why and how to run it."""
    try:
        specs = [s for s in catalog.all_probes() if s.name in probe_names]
    except UsageError:  # a broken entry point: the run's report says so elsewhere
        return checks
    phases = plan_mod.follow_ups(specs, world_size, fixed_by=launcher or "the launcher")
    return place(checks, [r for p in phases for r in _skipped(p, p["skip"])])
