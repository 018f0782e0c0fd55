"""The doctor-style screen: environment header, a line per check, then what to do."""

import re
import textwrap

from tabulate import tabulate

from ..core.outcomes import GLYPH, Outcome
from . import header

# The verdict as every renderer writes it: the JSON word, upper case where it fails the run.
VERDICT_LABEL = {"ok": "ok", "new": "new", "known": "known issue", "fixed": "fixed?",
                 "unexpected": "UNEXPECTED", "failure": "FAILURE",
                 "unsupported": "UNSUPPORTED"}


def _fmt_seconds(s):
    if s is None:
        return ""
    return "%.2fs" % s if s < 100 else "%.0fs" % s


def environment_lines(report):
    return tabulate(header.rows(report), tablefmt="plain")


def _outcome_cell(check):
    o = Outcome(check.outcome)
    return "%s %s" % (GLYPH[o], o.value)


_RANK_PREFIX = re.compile(r"^(rank [0-9,]+(?: on \S+)?: )")


def _story(c):
    """(what happened, an extra error line or None), each in full, not cut.

    The detail is cut to fit a table cell; where it is the start of the error's message,
    show the whole message instead. The type of a probe's own verdict (CheckFailed) says
    nothing to a user; the type of a real exception does.
    """
    detail = c.detail or ""
    error = c.error or {}
    message = " ".join((error.get("message") or "").split())
    m = _RANK_PREFIX.match(detail)
    prefix, rest = (m.group(1), detail[m.end():]) if m else ("", detail)
    rest = " ".join(rest.split())
    if message and rest and message.startswith(rest.rstrip("…").rstrip()):
        return prefix + message, None
    if message and message not in " ".join(detail.split()) \
            and error.get("type") != "CheckFailed":
        return detail, "%s: %s" % (error.get("type"), message)
    return detail, None


def _wrap(text, width, indent, max_lines=4):
    lines = textwrap.wrap(text, width - len(indent), initial_indent=indent,
                          subsequent_indent=indent)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][:width - 2] + " …"
    return lines


def verdict_summary(report, strict=False):
    """'nothing unexpected, 2 known issues' / '1 UNEXPECTED, 1 FAILURE': the words agree
    with the exit code (under --strict a known issue fails the run, and says so)."""
    counts = {}
    for c in report.checks:
        if c.verdict:
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
    bad = ["%d %s" % (counts[v], VERDICT_LABEL[v])
           for v in ("unexpected", "failure", "unsupported") if counts.get(v)]
    parts = bad or ["nothing unexpected"]
    known = counts.get("known", 0)
    if known:
        parts.append("%d known issue%s%s" % (known, "s" * (known != 1),
                                              " (failing under --strict)" if strict else ""))
    if counts.get("fixed"):
        parts.append("%d fixed? (the matrix expected a failure)" % counts["fixed"])
    return ", ".join(parts)


def whereabouts_lines(check, indent):
    """Where every rank was when a hang stopped them, ranks in the same place grouped:
    '  ranks 0,2: waiting in all_reduce (distributed_c10d.py:2806 all_reduce)'."""
    places = {}
    for key, entry in sorted((check.ranks or {}).items(), key=lambda kv: int(kv[0])):
        where = entry.get("where")
        if not where:
            continue
        if where.get("stopped"):
            text = "stopped (state T), no stack"
        elif where.get("waiting_in"):
            text = "waiting in %s (%s)" % (where["waiting_in"], where["at"])
        else:
            text = "at %s" % where["at"]
        places.setdefault(text, []).append(key)
    return ["%s%s %s: %s" % (indent, "ranks" if len(ranks) > 1 else "rank", ",".join(ranks),
                             text) for text, ranks in places.items()]


DEFAULT_WIDTH = 100  # pipes and files: a width CI logs and editors show whole
DETAIL_AT_LEAST = 16  # a narrower detail column says nothing: leave it to "What to do"


def _fit(lines, width):
    """Cut what still overflows (a long path in the header) with the one ellipsis."""
    return [line if len(line) <= width else line[:width - 1] + "…" for line in lines]


def _checks_table(report, width):
    """The table of checks; on a terminal of ``width`` columns the detail gets what the
    other columns leave, and goes when that is too little to read."""
    has_verdicts = any(c.verdict for c in report.checks)
    headers = ["probe", "check", "outcome"] + (["verdict"] if has_verdicts else []) + \
        ["time"]
    rows = []
    for c in report.checks:
        row = [c.probe, c.check, _outcome_cell(c)]
        if has_verdicts:
            row.append(VERDICT_LABEL.get(c.verdict, c.verdict or ""))
        rows.append(row + [_fmt_seconds(c.seconds)])
    fixed = tabulate(rows, headers=headers).splitlines()
    room = (width - max(len(line) for line in fixed) - 2) if width else 60
    if width and room < DETAIL_AT_LEAST:
        # Too narrow for a detail column: what did not pass gets its detail on a line of
        # its own under the row, from the check column on.
        indent = " " * (fixed[1].index(" ") + 2)
        out = fixed[:2]
        for line, c in zip(fixed[2:], report.checks):
            out.append(line)
            if c.detail and c.outcome != "passed":
                out.append(indent + textwrap.shorten(c.detail, width - len(indent),
                                                     placeholder="…"))
        return "\n".join(out)
    details = [textwrap.shorten(c.detail or "", room, placeholder="…") if c.detail else ""
               for c in report.checks]
    return tabulate([r + [d] for r, d in zip(rows, details)], headers=headers + ["detail"])


def render(report, width=None, strict=False):
    """The screen. ``width``: the terminal's columns, every line fits; None (a pipe, a
    file): the layout of DEFAULT_WIDTH."""
    terminal = width
    width = width or DEFAULT_WIDTH
    out = ["envcheck %s · %s" % (report.envcheck_version, report.created), ""]
    out += _fit(environment_lines(report).splitlines(), width) if terminal \
        else [environment_lines(report)]
    out += ["", _checks_table(report, terminal), ""]
    todo = [c for c in report.checks
            if Outcome(c.outcome).is_bad or c.verdict in ("known", "fixed")]
    if todo:
        out.append("What to do:")
        for c in todo:
            label = VERDICT_LABEL.get(c.verdict, c.outcome) if c.verdict else c.outcome
            out.append("  %s %s (%s)" % (GLYPH[Outcome(c.outcome)], c.id, label))
            story, error_line = _story(c)
            out.extend(_wrap(story, width, "      ", max_lines=6))
            if error_line:
                out.extend(_wrap(error_line, width, "      ", max_lines=3))
            if c.advice:
                out.extend(textwrap.wrap(c.advice, width - 6, initial_indent="    → ",
                                         subsequent_indent="      "))
            if c.expectation and c.expectation.get("source"):
                out.extend(_wrap("source: %s" % c.expectation["source"], width, "      "))
            if c.outcome == "hang":
                out.extend(_fit(whereabouts_lines(c, "      "), width) if terminal
                           else whereabouts_lines(c, "      "))
                out.append("      full Python stacks: --json PATH, checks[].ranks[].stack")
        out.append("")
    s = report.summary()
    parts = ["%d %s" % (s[k], k) for k in ("passed", "failed", "hang", "crash", "skipped")
             if s[k]]
    tail = "%s in %.1f s" % (", ".join(parts), report.duration_s)
    if report.interrupted:
        tail += " — INTERRUPTED by %s, report is partial" % report.interrupted
    elif any(c.verdict for c in report.checks):
        tail += "; " + verdict_summary(report, strict)
    for note in (report.plan or {}).get("notes") or []:
        out.extend(textwrap.wrap("note: %s" % note, width, subsequent_indent="      ")
                   if terminal else ["note: %s" % note])
    out.extend(textwrap.wrap(tail, width, subsequent_indent="  ") if terminal else [tail])
    return "\n".join(out) + "\n"
