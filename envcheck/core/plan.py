"""The plan every rank follows, the same under ``envcheck run`` and under a launcher.

A plan is plain JSON (it crosses into ranks that may run another interpreter): the
backend asked for, the per-phase timeout, the process group's own timeout, the probes
as catalog entries in the order they run, and the probe options (``--model``).
"""

import json
import math

from .errors import UsageError

DEFAULT_TIMEOUT = 60.0
# Past a day a timeout is a typo (or inf): datetime.timedelta and the OS wait would take it.
MAX_TIMEOUT = 86400
# Below a second no phase can be timed: the watch loop, a rank's start, a process group's
# rendezvous take that long; 0.001 would be a hang declared before anything began.
MIN_TIMEOUT = 1.0
BACKENDS = ("auto", "gloo", "nccl")


def group_timeout(timeout):
    """The process group's own timeout: longer than the phase timeout, so that a hang is
    noticed by envcheck (which then collects stacks) while the ranks still sit in the
    collective, not by torch raising in one rank and the others dying after it."""
    return 2 * timeout + 10


def startup_timeout(timeout):
    """Starting Python and importing torch: slow on a cold shared filesystem."""
    return max(120.0, timeout)


def min_busbw(text):
    """``--min-busbw`` as a float in GB/s; a UsageError quoting the bad value."""
    if text is None:
        return None
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value) or value <= 0:
        raise UsageError("--min-busbw %s: a bus bandwidth in GB/s above 0 is needed, as "
                         "nccl-tests' NCCL_TESTS_MIN_BW (e.g. --min-busbw 40)" % (text,))
    return value


def rank_plan(backend, timeout, entries, options=None):
    return {"backend": backend, "timeout": float(timeout),
            "group_timeout": group_timeout(float(timeout)),
            "probes": list(entries), "options": dict(options or {})}


def summary(plan):
    """What a report says of the plan it ran (probe names, not entries)."""
    return {"backend": plan["backend"], "timeout": plan["timeout"],
            "probes": [e["name"] for e in plan["probes"]], "options": plan["options"]}


def write(path, plan):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(plan, f)


def read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def follow_ups(specs, nproc, fixed_by=None, max_ranks=None):
    """The follow-up phases of the chosen probes (``probes/spec.py``: each a ``Probe``,
    its ``follow_ups`` ``FollowUp``s) after a main run of ``nproc`` ranks, in probe order.

    Each is ``{"probe", "check", "also", "world_size", "saved_world_size", "entry",
    "skip"}`` (``also``: the further checks the phase reports):
    ``entry`` is the plan entry the phase's ranks run (the follow-up function, with
    ``phase`` telling it which check and what the main run's world size was); ``skip`` a
    reason it cannot run (a world size that is the main run's own or below 1, or
    ``fixed_by`` a launcher that fixed the world size, or more ranks than ``max_ranks``,
    the GPUs of an NCCL run), else None.
    """
    phases = []
    for spec in specs:
        for item in spec.follow_ups:
            size = item.size(nproc)
            skip = None
            if fixed_by:
                skip = ("not run: under %s every rank belongs to the one job of %d ranks; "
                        "loading at another world size needs envcheck run, which starts "
                        "ranks itself (envcheck run -p %s --nproc %d)"
                        % (fixed_by, nproc, spec.name, nproc))
            elif size < 1:
                skip = "not run: world size %s of %d ranks is below 1" % (
                    item.world_size, nproc)
            elif max_ranks is not None and size > max_ranks:
                skip = ("not run: %d ranks need %d GPUs, this machine has %d; run with "
                        "fewer ranks (--nproc %d) to load at a larger world size"
                        % (size, size, max_ranks, max(1, nproc - (size - max_ranks))))
            elif size == nproc:
                skip = ("not run: the main run already has %d rank(s); this follow-up "
                        "loads at another world size (%s), run with more ranks (--nproc "
                        "%d)" % (nproc, item.world_size, nproc + 1))
            phase = {"check": item.check, "saved_world_size": nproc, "world_size": size}
            entry = dict(spec.plan_entry(), function=item.function, phase=phase)
            phases.append({"probe": spec.name, "check": item.check,
                           "also": tuple(item.also), "world_size": size,
                           "saved_world_size": nproc, "entry": entry, "skip": skip})
    return phases
