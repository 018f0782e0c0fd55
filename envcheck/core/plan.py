"""The plan every rank follows, the same under ``envcheck run`` and under a launcher.

A plan is plain JSON (it crosses into ranks that may run another interpreter): the
backend asked for, the per-phase timeout, the process group's own timeout, the probes
as catalog entries in the order they run, and the probe options (``--model``).
"""

import json

DEFAULT_TIMEOUT = 60.0
# Past a day a timeout is a typo (or inf): datetime.timedelta and the OS wait would take it.
MAX_TIMEOUT = 86400
BACKENDS = ("auto", "gloo", "nccl")


def group_timeout(timeout):
    """The process group's own timeout: longer than the phase timeout, so that a hang is
    noticed by envcheck (which then collects stacks) while the ranks still sit in the
    collective, not by torch raising in one rank and the others dying after it."""
    return 2 * timeout + 10


def startup_timeout(timeout):
    """Starting Python and importing torch: slow on a cold shared filesystem."""
    return max(120.0, timeout)


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
