"""The answer as SLURM takes it: the hosts that failed as a hostlist for ``srun
--exclude`` / ``sbatch --exclude``, a ``scontrol update ... State=DRAIN`` line per failed
host with envcheck's reason, and the ready hosts (``--nodelist``).

Every file is written whole or not at all (core/atomic). Host names come from files
anyone could have written: a name SLURM would not take as one host (a comma, a bracket,
a space, a quote) goes in no file, and the caller says so; reasons are shell-quoted.
"""

import dataclasses
import re
import shlex
from typing import List, Optional, Tuple

from ..core.atomic import write_atomic
from ..core.errors import UsageError
from ..summary import hostlist
from ..summary.inputs import FAILS, UNKNOWN, WORKS

STYLES = ("slurm", "lines")
REASON_LIMIT = 200  # characters of a drain reason: what `sinfo -R`/`scontrol` show whole
_HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,252}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


@dataclasses.dataclass(frozen=True)
class HostAnswer:
    host: str
    status: str  # works, fails, unknown (summary/inputs' words)
    reasons: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Outputs:
    failed: Optional[str] = None  # paths; None: not asked
    drain: Optional[str] = None
    ready: Optional[str] = None
    style: str = "slurm"

    def __bool__(self):
        return bool(self.failed or self.drain or self.ready)

    def check(self):
        """Bad options before any work: one line, exit 2."""
        if self.style not in STYLES:
            raise UsageError("--hostlist-style %r: choose %s" % (self.style, " or ".join(STYLES)))
        from ..report.model import check_writable

        for path in (self.failed, self.drain, self.ready):
            if path:
                check_writable(path)


def from_summary(summary) -> List[HostAnswer]:
    return [HostAnswer(r.host, r.status, tuple(r.reasons)) for r in summary.records]


def from_report(report) -> List[HostAnswer]:
    """Per host of a (launcher-mode) run report: fails when a failing check blames it;
    a host no check blames is ready, unless the run was cut short (then unknown)."""
    from . import hosts

    out = []
    for host, blames in sorted(hosts.blamed(report).items()):
        reasons = tuple(dict.fromkeys("%s: %s" % (b.check, b.detail) if b.detail else b.check
                                      for b in blames))
        status = FAILS if reasons else UNKNOWN if report.interrupted else WORKS
        out.append(HostAnswer(host, status, reasons))
    return out


def usable(answers):
    """(answers whose host SLURM takes as one name, the names it would not)."""
    good = [a for a in answers if _HOST.match(a.host)]
    return good, sorted({a.host for a in answers if not _HOST.match(a.host)})


def hostlist_text(hosts, style="slurm"):
    """The hosts, sorted as a person reads them: SLURM's compressed form on one line
    ('node[1-3,7]'), or one name a line; empty (no line at all) for no host."""
    hosts = sorted(set(hosts), key=hostlist.natural)
    if not hosts:
        return ""
    return (hostlist.slurm(hosts) if style == "slurm" else "\n".join(hosts)) + "\n"


def reason(reasons):
    """The drain reason: 'envcheck: ' and the reasons, on one line of printable text."""
    text = "envcheck: " + "; ".join(reasons)
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= REASON_LIMIT else text[:REASON_LIMIT - 3].rstrip() + "..."


def drain_script(answers):
    """A shell script: a ``scontrol update`` per failed host, with its reason."""
    failed = sorted((a for a in answers if a.status == FAILS),
                    key=lambda a: hostlist.natural(a.host))
    lines = ["#!/bin/sh",
             "# envcheck: drain the %d host(s) that failed, each with its reason." % len(failed),
             "# Review, then run it where scontrol reaches slurmctld as a SLURM admin: "
             "sh FILE",
             "# Undo for one host: scontrol update NodeName=HOST State=RESUME"]
    lines += ["scontrol update NodeName=%s State=DRAIN Reason=%s"
              % (a.host, shlex.quote(reason(a.reasons or ("failed",)))) for a in failed]
    return "\n".join(lines) + "\n"


def write(answers, outputs):
    """Write the files ``outputs`` asks for; returns the host names left out of them."""
    good, left_out = usable(answers)
    files = ((outputs.failed, lambda: hostlist_text(
                 [a.host for a in good if a.status == FAILS], outputs.style)),
             (outputs.drain, lambda: drain_script(good)),
             (outputs.ready, lambda: hostlist_text(
                 [a.host for a in good if a.status == WORKS], outputs.style)))
    for path, text in files:
        if path:
            try:
                write_atomic(path, text())
            except OSError as exc:
                raise UsageError("cannot write %s: %s" % (path, exc.strerror or exc)) from None
    return left_out
