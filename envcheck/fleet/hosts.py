"""Which hosts a run report blames: a launcher-mode report covers every host of the job,
and a scheduler needs to know which of them to leave out, not that "the job" failed.

A check fails the run by the same rule as the run's exit code (a judged check by its
verdict, known issues pass; an unjudged one by its outcome). The hosts it blames:

- a hang or a crash: the host of its root rank (the one the others waited for, or the
  first to die: ``core/blame``), when the report names one;
- a failure: the hosts of the ranks that failed (the multi-host checks fail only on the
  odd host's ranks: ``hosts.clock``, ``hosts.skew``, ``bandwidth.per_host``,
  ``setup.socket_interface``);
- otherwise every host of the run (nothing tells them apart).

A host is *ready* when no failing check blames it.
"""

import dataclasses
from typing import Dict, List, Tuple

from ..core.outcomes import Outcome, Verdict
from ..core.text import first_line

WORKS, FAILS = "works", "fails"  # the words of summary/inputs


@dataclasses.dataclass(frozen=True)
class Blame:
    check: str  # "setup.socket_interface failed (unexpected)"
    detail: str  # the first line of what the blamed host's rank said; may be ""


def failing(check):
    """True when this check makes the run fail (core/outcomes.exit_code's rule)."""
    if check.verdict is not None:
        return Verdict(check.verdict).is_bad
    return Outcome(check.outcome).is_bad


def short(check):
    """'setup.socket_interface failed (unexpected)': the summary's reason for a check."""
    return "%s %s%s" % (check.id, check.outcome,
                        " (unexpected)" if check.verdict == "unexpected" else "")


def rank_hosts(report):
    """rank number -> host, from the report's ranks."""
    out = {}
    for i, r in enumerate(report.ranks or []):
        rank = r.get("rank", i)
        if isinstance(rank, int) and isinstance(r.get("host"), str) and r["host"]:
            out[rank] = r["host"]
    return out


def blamed(report) -> Dict[str, List[Blame]]:
    """host -> the failing checks that blame it, for every host of the report (a host
    no check blames has an empty list: it is ready)."""
    hosts = rank_hosts(report)
    out: Dict[str, List[Blame]] = {h: [] for h in sorted(set(hosts.values()))}
    for c in report.checks:
        if not failing(c):
            continue
        for host, rank in _culprits(c, hosts):
            entry = (c.ranks or {}).get(str(rank)) or {}
            said = entry.get("detail") or (entry.get("error") or {}).get("message") \
                or c.detail or (c.error or {}).get("message") or ""
            out.setdefault(host, []).append(Blame(short(c), first_line(str(said))))
    return out


def _culprits(check, hosts) -> List[Tuple[str, int]]:
    """(host, a rank of it whose words say why) for each host the check blames."""
    if check.outcome in ("hang", "crash") and check.root_rank in hosts:
        return [(hosts[check.root_rank], check.root_rank)]
    bad = sorted(int(r) for r, e in (check.ranks or {}).items()
                 if isinstance(e, dict) and e.get("outcome") in ("failed", "hang", "crash")
                 and str(r).isdigit() and int(r) in hosts)
    if not bad and check.root_rank in hosts:
        bad = [check.root_rank]
    if not bad:
        bad = sorted(hosts)
    first: Dict[str, int] = {}
    for r in bad:
        first.setdefault(hosts[r], r)
    return sorted(first.items())
