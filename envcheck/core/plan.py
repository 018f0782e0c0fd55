"""The plan every rank follows, the same under ``envcheck run`` and under a launcher.

A plan is plain JSON (it crosses into ranks that may run another interpreter): the
backend asked for, the per-phase timeout, the process group's own timeout, the probes
as catalog entries in the order they run, and the probe options (``--model``).
"""

import dataclasses
import json
import math
from typing import Any, Dict, Optional, Tuple

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


@dataclasses.dataclass(frozen=True)
class ProbeEntry:
    """One probe as a rank is handed it (``probes/spec.Probe.plan_entry``): where its
    function is (a module, or a file), the checks it may report (None: any), what to
    import ahead, and for a follow-up phase, the phase and the hand-off directory the
    main run left its state in (``run/follow_up.py``)."""

    name: str
    function: str
    checks: Optional[Tuple[str, ...]]
    module: Optional[str] = None
    path: Optional[str] = None
    preload: Tuple[str, ...] = ()
    preload_in_rank: Tuple[str, ...] = ()
    phase: Optional[Dict[str, Any]] = None
    handoff: Optional[str] = None

    def __post_init__(self) -> None:
        if (self.module is None) == (self.path is None):
            raise ValueError("probe %r: a module or a path, not both" % self.name)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ProbeEntry":
        _only(data, cls, "a probe entry")
        checks = data.get("checks")
        return cls(name=_text(data, "name"), function=_text(data, "function"),
                   checks=None if checks is None else _texts(checks, "checks"),
                   module=data.get("module"), path=data.get("path"),
                   preload=_texts(data.get("preload") or (), "preload"),
                   preload_in_rank=_texts(data.get("preload_in_rank") or (),
                                          "preload_in_rank"),
                   phase=data.get("phase"), handoff=data.get("handoff"))

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "function": self.function,
                               "checks": None if self.checks is None else list(self.checks),
                               "preload": list(self.preload),
                               "preload_in_rank": list(self.preload_in_rank)}
        out["path" if self.path else "module"] = self.path or self.module
        if self.phase is not None:
            out["phase"] = dict(self.phase)
        if self.handoff is not None:
            out["handoff"] = self.handoff
        return out


@dataclasses.dataclass(frozen=True)
class RankPlan:
    """What every rank follows: the backend asked for, the per-phase timeout, the process
    group's own timeout, the probes in the order they run, and the probe options. It
    crosses into the ranks as JSON (``to_dict``, ``write``; ``read`` checks it)."""

    backend: str
    timeout: float
    group_timeout: float
    probes: Tuple[ProbeEntry, ...]
    options: Dict[str, Any]

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError("backend %r: one of %s" % (self.backend, ", ".join(BACKENDS)))
        for name in ("timeout", "group_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not MIN_TIMEOUT <= value <= 2 * MAX_TIMEOUT + 10:
                raise ValueError("%s %r: seconds from %g to a day" % (name, value,
                                                                      MIN_TIMEOUT))

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "RankPlan":
        _only(data, cls, "a plan")
        probes = data.get("probes")
        if not isinstance(probes, list) or not all(isinstance(p, dict) for p in probes):
            raise ValueError("a plan's probes are a list of entries")
        options = data.get("options") or {}
        if not isinstance(options, dict):
            raise ValueError("a plan's options are an object")
        missing = [k for k in ("backend", "timeout", "group_timeout") if k not in data]
        if missing:
            raise ValueError("a plan has no %s" % ", ".join(missing))
        return cls(backend=data["backend"], timeout=data["timeout"],
                   group_timeout=data["group_timeout"],
                   probes=tuple(ProbeEntry.from_dict(p) for p in probes), options=options)

    def to_dict(self) -> Dict[str, Any]:
        return {"backend": self.backend, "timeout": float(self.timeout),
                "group_timeout": float(self.group_timeout),
                "probes": [p.to_dict() for p in self.probes], "options": dict(self.options)}


def _only(data: Any, cls: Any, what: str) -> None:
    if not isinstance(data, dict):
        raise ValueError("%s is a JSON object" % what)
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ValueError("%s has no field %s" % (what, ", ".join(unknown)))


def _text(data: Dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError("a probe entry's %s is a name" % key)
    return value


def _texts(values: Any, key: str) -> Tuple[str, ...]:
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise ValueError("a probe entry's %s is a list of names" % key)
    return tuple(values)


def rank_plan(backend, timeout, entries, options=None):
    """The plan every rank follows, checked, as the JSON the ranks read."""
    return RankPlan(backend, float(timeout), group_timeout(float(timeout)),
                    tuple(ProbeEntry.from_dict(e) for e in entries),
                    dict(options or {})).to_dict()


def summary(plan):
    """What a report says of the plan it ran (probe names, not entries)."""
    return {"backend": plan["backend"], "timeout": plan["timeout"],
            "probes": [e["name"] for e in plan["probes"]], "options": plan["options"]}


def write(path, plan):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(plan, f)


def read(path):
    """A plan file, checked (``RankPlan``): ValueError naming what is wrong."""
    with open(path, encoding="utf-8") as f:
        return RankPlan.from_dict(json.load(f)).to_dict()


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
                fewer = nproc - (size - max_ranks)
                skip = ("not run: %d ranks need %d GPUs, this machine has %d; %s"
                        % (size, size, max_ranks,
                           "run with fewer ranks (--nproc %d) to load at a larger world "
                           "size" % fewer if fewer >= 1 else
                           "it needs a machine with %d GPUs, or the ranks on CPU "
                           "(--backend gloo)" % size))
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
