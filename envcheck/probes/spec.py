"""What a probe is, declared: its name, summary, checks, follow-up phases, what it
imports ahead, and whether it runs only when asked for.

The built-in probes are declared in ``suite.py``, one ordered list. A custom probe (a
``--probe-path`` file or an ``envcheck.probes`` entry point) is read into the same
``Probe`` from its file's literals (``catalog.py``), as the README documents.

stdlib only, and never imports a probe's module: the supervisor reads this without torch,
and a rank reads the plan entries made from it (``Probe.plan_entry``).
"""

import dataclasses
from typing import Optional, Tuple, Union

# A follow-up's world size: a number of ranks, or "N", "N+K", "N-K" with N the main
# run's world size.
WorldSize = Union[int, str]


def world_size_rule(rule: WorldSize, where: str = "FOLLOW_UPS") -> Tuple[Optional[str], int]:
    """(base, offset): "N+1" -> ("N", 1), "N-1" -> ("N", -1), "N" -> ("N", 0), 3 -> (None, 3).

    ValueError, naming ``where``, for anything else."""
    if isinstance(rule, int) and not isinstance(rule, bool) and rule >= 1:
        return None, rule
    text = str(rule).replace(" ", "")
    if isinstance(rule, str) and text.isdigit() and int(text) >= 1:
        return None, int(text)
    if isinstance(rule, str) and text.startswith("N"):
        rest = text[1:]
        if not rest:
            return "N", 0
        if rest[0] in "+-" and rest[1:].isdigit():
            return "N", int(rest)
    raise ValueError("%s: world_size %r: write a number of ranks (1), or N, N+K, N-K "
                     "(N is the main run's world size)" % (where, rule))


@dataclasses.dataclass(frozen=True)
class FollowUp:
    """A phase ``envcheck run`` starts after the main run, at another world size: every
    rank of a job of ``world_size`` runs the probe module's function ``function`` (not a
    probe), which reports ``check`` and the checks in ``also``. A phase that cannot run
    reports each of them skipped, saying why."""

    function: str
    world_size: WorldSize
    check: str
    also: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        world_size_rule(self.world_size, "follow-up %s" % self.function)

    def size(self, nproc: int) -> int:
        """Its world size after a main run of ``nproc`` ranks (below 1: it cannot run)."""
        base, k = world_size_rule(self.world_size)
        return nproc + k if base else k

    @property
    def checks(self) -> Tuple[str, ...]:
        return (self.check,) + tuple(self.also)

    def as_dict(self) -> dict:
        """The plain form a rank's phase and a report carry."""
        out: dict = {"function": self.function, "world_size": self.world_size,
                     "check": self.check}
        if self.also:
            out["also"] = list(self.also)
        return out


@dataclasses.dataclass(frozen=True)
class Probe:
    """One probe. Its checks are what its ranks may report (a check not declared is an
    error, reported as such); ``None`` only for a custom probe that declares none."""

    name: str
    summary: str
    function: str
    checks: Optional[Tuple[str, ...]]
    module: Optional[str] = None  # importable module (built-in and entry-point probes)
    path: Optional[str] = None  # file path (--probe-path probes)
    builtin: bool = False
    follow_ups: Tuple[FollowUp, ...] = ()
    # torch's own modules it imports lazily: imported ahead (the zygote before the fork
    # on a CPU build, else the rank while it waits at the rendezvous: worker/runtime).
    preload: Tuple[str, ...] = ()
    # Modules that read the rank's environment as they import (the training frameworks:
    # Lightning reads RANK): imported in the rank itself, never in the zygote.
    preload_in_rank: Tuple[str, ...] = ()
    # Runs only when asked for by name (-p NAME): it costs more than the default suite.
    opt_in: bool = False

    def __post_init__(self) -> None:
        if (self.module is None) == (self.path is None):
            raise ValueError("probe %r: give a module or a path, not both" % self.name)
        if self.checks is not None:
            bad = [c for c in self.checks if not c or "." in c]
            if bad or len(set(self.checks)) != len(self.checks):
                raise ValueError("probe %r: checks must be distinct names without dots"
                                 % self.name)
            for follow in self.follow_ups:
                missing = [c for c in follow.checks if c not in self.checks]
                if missing:
                    raise ValueError("probe %r: follow-up check(s) %s not among its checks"
                                     % (self.name, ", ".join(missing)))

    def plan_entry(self) -> dict:
        """What a rank is handed to run this probe (plain JSON: it may cross into another
        interpreter)."""
        entry: dict = {"name": self.name, "function": self.function,
                       "checks": list(self.checks) if self.checks is not None else None,
                       "preload": list(self.preload),
                       "preload_in_rank": list(self.preload_in_rank)}
        if self.path:
            entry["path"] = self.path
        else:
            entry["module"] = self.module
        return entry
