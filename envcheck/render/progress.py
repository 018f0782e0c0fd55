"""Live progress while ranks run: a live view on a terminal, plain lines otherwise.

Fed with every rank's records by the supervisor (``on_event``), it reads them with the
same phase tracker the supervisor uses (``core.phases``), so the time it shows against
the timeout is the time the supervisor judges a hang by. The final screen is printed
separately: progress goes to stderr and never mixes with a report on stdout.

On a terminal: a spinner line that moves even while nothing is written (so a frozen
screen is a frozen terminal, not a slow probe) with the current probe and check, the
seconds spent against the timeout, and how many ranks imported torch and joined the
process group; above it, a line per probe that finished. The whole view goes when the
run ends: the report on stdout then has the same rows, in the same order, as it has in a
pipe (setup's included). Not a terminal (CI logs, a pipe): a plain line per step, as
before. ``--quiet``: nothing.
"""

import os
import sys
import time

from ..core.outcomes import worst
from ..core.phases import PhaseTracker
from . import vocabulary
from ..report.model import CheckResult


class _Probe:
    def __init__(self, name):
        self.name = name
        self.records = {}  # check -> [its record from each rank]
        self.ended = set()  # ranks that said probe_end
        self.seconds = 0.0
        self.printed = False

    def results(self):
        """One CheckResult per check, as the report will merge it: the worst outcome, told
        by the rank that had it first."""
        out = []
        for check, recs in self.records.items():
            outcome = worst(r["outcome"] for r in recs)
            rec = next(r for r in recs if r["outcome"] == outcome.value)
            out.append(CheckResult(self.name, check, outcome.value, detail=rec.get("detail"),
                                   error=rec.get("error")))
        return out

    @staticmethod
    def line_parts(checks, strict=False):
        """(glyph, style, summary): '5 passed, 4 known issues' for ``checks`` (judged when
        the matrix was there to judge them), as the report's line for the probe."""
        return vocabulary.probe_line_parts(checks, strict)


class Progress:
    def __init__(self, stream=None, enabled=True, no_color=False, plan=None, judge=None,
                 strict=False):
        """``judge(checks, environment, backend)``: sets the checks' verdicts from the
        matrix, so that a probe's line says "known issue" where the report will."""
        from . import paint

        self.stream = stream or sys.stderr
        self.enabled = enabled
        # A dumb terminal cannot redraw a line: it gets the plain lines.
        self.tty = enabled and _isatty(self.stream) and os.environ.get("TERM") != "dumb"
        self.colour = enabled and paint.wanted(self.stream, no_color)
        self.nproc = getattr(plan, "nproc", None)
        self.timeout = getattr(plan, "timeout", None)
        self.startup_timeout = getattr(plan, "startup_timeout", None) or self.timeout
        self.planned = [p.name for p in getattr(plan, "probes", [])]
        self.judge, self.strict = judge, strict
        self.phase = None  # the follow-up phase running now (run/follow_up.py)
        self.environment, self.backend = None, None
        self._live = None
        self._left = []  # the lines of the probes that finished, above the live line
        self._reset()

    def _reset(self):
        self.trackers = {}
        self.imported = set()
        self.joined = set()
        self.probes = {}
        self.started = time.monotonic()

    # -- the record stream -------------------------------------------------------------

    def __call__(self, rec):
        if not self.enabled:
            return
        rank, kind = rec.get("rank"), rec["t"]
        if kind == "phase":
            # A follow-up phase: fresh ranks, at its own world size, for one check.
            self._flush()
            self._reset()
            self.nproc, self.phase = rec["world_size"], rec
            return
        if kind == "hello" and rank in self.imported:
            # Fresh ranks after a hang or crash: what was open will not finish.
            self._flush()
            self._reset()
        tracker = self.trackers.setdefault(rank, PhaseTracker(self.started))
        tracker.observe(rec)
        if kind == "hello":
            self.imported.add(rank)
        elif kind == "setup" and rec.get("outcome") == "passed":
            self.joined.add(rank)
        elif kind == "probe_start" and rec["probe"] not in self.probes:
            self.probes[rec["probe"]] = _Probe(rec["probe"])
        elif kind == "check" and rec.get("probe") in self.probes:
            self.probes[rec["probe"]].records.setdefault(rec["check"], []).append(rec)
        elif kind == "env" and rec.get("environment"):
            self.environment, self.backend = rec["environment"], rec.get("backend")
        elif kind == "probe_end" and rec.get("probe") in self.probes:
            probe = self.probes[rec["probe"]]
            probe.ended.add(rank)
            probe.seconds = max(probe.seconds, rec.get("seconds") or 0.0)
            if self.tty and probe.ended >= self.joined:
                self._leave(probe)
        if not self.tty and rank == 0:
            self._plain(rec)

    def _plain(self, rec):
        kind = rec["t"]
        if kind == "hello":
            self._say("torch imported in %.2f s" % rec.get("torch_import_s", 0))
        elif kind == "setup_start":
            self._say("init_process_group (%s)" % rec.get("backend"))
        elif kind == "probe_start":
            self._say("probe %s" % rec["probe"])

    def _say(self, text):
        try:
            self.stream.write("envcheck: %s\n" % text)
            self.stream.flush()
        except (OSError, ValueError):  # stderr's reader went away: the run goes on
            self.enabled = False

    # -- the live view -------------------------------------------------------------------

    def __enter__(self):
        if self.tty:
            from rich.console import Console
            from rich.live import Live
            from rich.spinner import Spinner

            # No colour at all (color_system None), not only no colours: bold and dim too.
            console = Console(file=self.stream, color_system="auto" if self.colour else None,
                              highlight=False, soft_wrap=False)
            self._spinner = Spinner("dots", style="cyan")
            self._live = Live(self, console=console, refresh_per_second=8, transient=True)
            self._live.start()
        return self

    def __exit__(self, *exc):
        if self._live:
            self._flush()
            self._live.stop()
        return False

    def __rich__(self):
        from rich.console import Group
        from rich.text import Text

        # One line, cut to the terminal's width: a wrapped live line would redraw badly.
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        line.append_text(self._spinner.render(time.monotonic()))
        line.append(" " + self.status())
        return Group(*self._left, line) if self._left else line

    def status(self, now=None):
        """The live line: what runs now and for how long, against which limit."""
        now = time.monotonic() if now is None else now
        n = self.nproc or len(self.trackers) or 1
        rank0 = self.trackers.get(0)
        phase = rank0.phase if rank0 else "startup"
        # list(): one snapshot, taken at once (rich redraws from its own thread while the
        # supervisor's thread adds ranks)
        open_phases = [t for t in list(self.trackers.values()) if t.phase != "done"]
        since = min((t.started for t in open_phases), default=self.started)
        if len(self.imported) < n or phase == "startup":
            what = "starting ranks"
            limit = self.startup_timeout
            since = self.started if len(self.imported) < n else since
        elif phase == "setup":
            what = "init_process_group"
            limit = self.timeout
        elif rank0.probe:
            of = " %d/%d" % (self._number(rank0.probe), len(self.planned)) \
                if self.planned else ""
            if self.phase:
                n = self.phase["world_size"]
                of = ".%s at %d rank%s" % (self.phase["check"], n, "" if n == 1 else "s")
            what = "probe %s%s%s" % (rank0.probe, of,
                                     " · %s" % rank0.check if rank0.check else "")
            limit = self.timeout
        elif phase == "teardown":
            what, limit = "final barrier", self.timeout
        elif phase == "done":
            return "ranks finished, %d/%d ranks in the group" % (len(self.joined), n)
        else:
            what, limit = "between probes", self.timeout
        ranks = "%d/%d ranks imported torch" % (len(self.imported), n)
        if len(self.imported) >= n:
            ranks = "%d/%d ranks in the group" % (len(self.joined), n)
        elapsed = now - since
        clock = "%.1f s" % elapsed
        if limit:
            clock += " of %g s" % limit
            if elapsed > limit:
                # the supervisor takes the stacks, stops the ranks and starts fresh ones
                clock += ": a hang; collecting stacks, restarting"
        return "%s · %s · %s" % (what, clock, ranks)

    def _number(self, name):
        try:
            return self.planned.index(name) + 1
        except ValueError:
            return len(self.probes)

    def _leave(self, probe, unfinished=False):
        """The one line a probe leaves behind: '✓ collectives  6 passed  0.21 s'."""
        if probe.printed:
            return
        probe.printed = True
        from rich.text import Text

        checks = probe.results()
        if self.judge and checks and not unfinished:
            self.judge(checks, self.environment, self.backend)
        glyph, style, counts = probe.line_parts(checks, self.strict)
        if unfinished:  # a hang, a crash or Ctrl-C: the report below says which
            glyph, style = vocabulary.OUTCOMES["skipped"].glyph, "yellow"
            counts = ("%s; " % counts if probe.records else "") + \
                "stopped before it finished (see below)"
        name = probe.name
        if self.phase and self.phase.get("probe") == probe.name:
            # not a second line for the same probe: the phase's check, at its world size
            name = "%s.%s" % (probe.name, self.phase["check"])
            n = self.phase["world_size"]
            counts += " at %d rank%s" % (n, "" if n == 1 else "s")
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(glyph, style=style)
        line.append(" %-14s %s" % (name, counts))
        if not unfinished:
            line.append("  %.2f s" % probe.seconds, style="dim")
        self._left.append(line)
        self._live.refresh()

    def _flush(self):
        """Probes still open when the ranks stopped (a hang, a crash, Ctrl-C)."""
        if not self._live:
            return
        for probe in self.probes.values():
            if not probe.printed:
                self._leave(probe, unfinished=not probe.ended >= self.joined
                            or not probe.ended)


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
