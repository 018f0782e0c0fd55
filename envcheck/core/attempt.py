"""One attempt: fresh ranks running a list of probes, and how it ended.

Both drivers describe what happened this way, and ``envcheck.run.merge`` turns attempts
into check results: the local supervisor builds them while it watches the ranks; launcher
mode replays them from the record files the ranks left (``envcheck.run.launcher``).
"""

import dataclasses
from typing import Optional


@dataclasses.dataclass
class Abort:
    """Why an attempt stopped before every rank said ``bye``."""

    kind: str  # hang, crash, interrupted, setup_failed
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
