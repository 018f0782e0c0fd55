"""One attempt: fresh ranks running a list of probes, and how it ended.

Both drivers describe what happened this way, and ``envcheck.run.merge`` turns attempts
into check results: the local supervisor builds them while it watches the ranks; launcher
mode replays them from the record files the ranks left (``envcheck.run.launcher``).
"""

import dataclasses
import enum
from typing import Any, Dict, Optional


class AbortKind(str, enum.Enum):
    """How an attempt ended before every rank said ``bye`` (a str: it compares, and goes
    into JSON, as its value)."""

    HANG = "hang"  # a phase ran past its deadline
    CRASH = "crash"  # a rank died
    INTERRUPTED = "interrupted"  # the user or a scheduler stopped the run
    SETUP_FAILED = "setup_failed"  # init_process_group failed on a rank

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Abort:
    """Why an attempt stopped before every rank said ``bye``."""

    kind: AbortKind  # a plain string is taken and checked
    root_rank: int
    phase: str  # the root rank's phase: startup, setup, probe:<name>, between, teardown
    # rank -> {exit_code, signal, stderr_tail, stack, last_record, phase, check,
    #          killed_by_envcheck, stopped_by}
    ranks: dict
    signum: Optional[int] = None
    waited_s: Optional[float] = None
    # hang: the limit the root rank's phase had (startup has its own)
    limit_s: Optional[float] = None
    stop_s: Optional[float] = None  # collecting stacks and killing the ranks
    deadline: Optional[float] = None  # hang: Unix time the root rank's phase ran out of time
    # hang: the ranks that waited at the rendezvous for the root, a rank still starting,
    # until their own limit ran out first (limit_s and deadline are then theirs)
    waiting: Optional[list] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", AbortKind(self.kind))  # ValueError: no such kind

    def summary(self) -> Dict[str, Any]:
        """What a report's ``attempts[].abort`` says of it."""
        out = {"kind": self.kind.value, "root_rank": self.root_rank, "phase": self.phase,
               "waited_s": self.waited_s, "stop_s": self.stop_s}
        if self.deadline is not None:
            out["deadline"] = round(self.deadline, 3)
        return out

    def to_dict(self) -> Dict[str, Any]:
        """All of it, as JSON (rank numbers become strings, as JSON keys must)."""
        out = dataclasses.asdict(self)
        out["kind"] = self.kind.value
        out["ranks"] = {str(r): v for r, v in self.ranks.items()}
        return out

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Abort":
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ValueError("an abort has no field %s" % ", ".join(unknown))
        return cls(**dict(data, ranks={int(r): v for r, v in data["ranks"].items()}))


@dataclasses.dataclass
class Attempt:
    probes: list  # plan entries ({"name": ...})
    port: int
    records: dict  # rank -> list of records
    abort: Optional[Abort] = None
    seconds: float = 0.0
    torn: int = 0  # record lines that were not whole records (skipped)
    started: Optional[float] = None  # Unix time the driver started the ranks (local runs)
    prepared: Optional[float] = None  # Unix time its zygote began importing torch, when earlier
    world_size: Optional[int] = None  # a follow-up phase's own world size (core.plan.follow_ups)

    def setup_error(self):
        for recs in self.records.values():
            for r in recs:
                if r["t"] == "setup" and r["outcome"] == "failed":
                    return r["error"]
        return None
