"""The doctor-style screen: environment header, a line per check, then what to do."""

import re
import textwrap

from tabulate import tabulate

from ..core.outcomes import Outcome, exit_code
from ..core.text import cut, rank_set, shorten
from . import header, vocabulary
from .paint import PLAIN, visible


def _fmt_seconds(s):
    if s is None:
        return ""
    return "%.2fs" % s if s < 100 else "%.0fs" % s


def environment_lines(report):
    return tabulate(header.rows(report), tablefmt="plain")


def _outcome_cell(check, paint=PLAIN, strict=False):
    word = vocabulary.outcome(check)
    return paint("%s %s" % (word.glyph, word.word), vocabulary.style(check, strict))


def _verdict_cell(check, paint=PLAIN, strict=False):
    word = vocabulary.verdict(check)
    if word is None:
        return check.verdict or ""
    return paint(word.word, vocabulary.style(check, strict))


_RANK_PREFIX = re.compile(r"^(ranks? [0-9][0-9,–]*(?: on [^:]+)?: )")


def story(c):
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
            and not vocabulary.is_internal(error):
        return detail, vocabulary.error_line(error)
    return detail, None


def _wrap(text, width, indent, max_lines=4):
    lines = textwrap.wrap(text, width - len(indent), initial_indent=indent,
                          subsequent_indent=indent)
    if len(lines) > max_lines:  # the rest is cut: the last line says so
        lines = lines[:max_lines]
        last = lines[-1]
        lines[-1] = cut(last, width - 1) if len(last) + 2 > width else last + " …"
    return lines


def verdict_summary(report, strict=False, paint=PLAIN):
    """'nothing unexpected, 2 known issues' / '1 UNEXPECTED, 1 FAILURE': the words agree
    with the exit code (under --strict a known issue fails the run, and says so)."""
    return ", ".join(paint(text, style) for text, style in
                     vocabulary.summary_parts(report.checks, strict))


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
    return ["%s%s: %s" % (indent, rank_set(ranks), text) for text, ranks in places.items()]


DEFAULT_WIDTH = 100  # pipes and files: a width CI logs and editors show whole
DETAIL_AT_LEAST = 16  # a narrower detail column says nothing: leave it to "What to do"
DETAIL_IN_FILES = 60  # the detail column in pipes and files; "What to do" has the rest


def _fit(lines, width):
    """Cut what still overflows (a long path in the header) with the one ellipsis."""
    return [cut(line, width) for line in lines]


def _checks_table(report, width, paint=PLAIN, strict=False):
    """The table of checks; on a terminal of ``width`` columns the detail gets what the
    other columns leave, and goes when that is too little to read."""
    has_verdicts = any(c.verdict for c in report.checks)
    headers = ["probe", "check", "outcome"] + (["verdict"] if has_verdicts else []) + \
        ["time"]
    rows = []
    for c in report.checks:
        row = [c.probe, c.check, _outcome_cell(c, paint, strict)]
        if has_verdicts:
            row.append(_verdict_cell(c, paint, strict))
        rows.append(row + [_fmt_seconds(c.seconds)])
    fixed = tabulate(rows, headers=headers).splitlines()
    room = (width - max(len(visible(line)) for line in fixed) - 2) if width \
        else DETAIL_IN_FILES
    if width and room < DETAIL_AT_LEAST:
        # Too narrow for a detail column: what did not pass gets its detail on a line of
        # its own under the row, from the check column on.
        indent = " " * (fixed[1].index(" ") + 2)
        out = fixed[:2]
        for line, c in zip(fixed[2:], report.checks):
            out.append(line)
            if c.detail and c.outcome != "passed":
                out.append(indent + shorten(c.detail, width - len(indent)))
        return "\n".join(out)
    details = [shorten(c.detail, room) for c in report.checks]
    return tabulate([r + [d] for r, d in zip(rows, details)], headers=headers + ["detail"])


def _todo_lines(report, width, terminal, paint, strict):
    todo = [c for c in report.checks
            if Outcome(c.outcome).is_bad or c.verdict in ("known", "fixed")]
    if not todo:
        return []
    out = [paint("What to do:", "bold")]
    for c in todo:
        glyph = vocabulary.outcome(c).glyph
        out.append("  %s %s (%s)" % (paint(glyph, vocabulary.style(c, strict)), c.id,
                                     paint(vocabulary.label(c), vocabulary.style(c, strict))))
        said, error_line = story(c)
        out.extend(_wrap(said, width, "      ", max_lines=6))
        if error_line:
            out.extend(_wrap(error_line, width, "      ", max_lines=3))
        for paragraph in (c.advice or "").split("\n"):  # the general fix, then a framework's
            advice = textwrap.wrap(paragraph, width - 6, initial_indent="    → ",
                                   subsequent_indent="      ")
            if advice:
                out.extend([advice[0].replace("→", paint("→", "cyan"), 1)] + advice[1:])
        if c.expectation and c.expectation.get("source"):
            out.extend(_wrap("source: %s" % c.expectation["source"], width, "      "))
        if c.outcome == "hang":
            out.extend(_fit(whereabouts_lines(c, "      "), width) if terminal
                       else whereabouts_lines(c, "      "))
            out.append("      full Python stacks: --json PATH, checks[].ranks[].stack")
    return out + [""]


def summary_line(report, strict=False):
    """'28 passed, 6 failed in 10.1 s; nothing unexpected, 6 known issues': the last line
    of the screen, and markdown's second."""
    s = report.summary()
    parts = [vocabulary.OUTCOMES[k].count(s[k]) for k in vocabulary.OUTCOMES if s[k]]
    tail = "%s in %.1f s" % (", ".join(parts), report.duration_s)
    if report.interrupted:
        tail += " — INTERRUPTED by %s, report is partial" % report.interrupted
    elif any(c.verdict for c in report.checks):
        tail += "; " + verdict_summary(report, strict)
    return tail


def _summary_style(report, strict):
    """The colour of the last line, as pytest's: red when the run fails, yellow when it
    passes with known issues (or was cut short), green when all is well."""
    if report.interrupted:
        return "bold yellow"
    if exit_code(report.checks, None, strict):
        return "bold red"
    if any(c.verdict == "known" for c in report.checks):
        return "yellow"
    return "green"


def render(report, width=None, strict=False, paint=PLAIN):
    """The screen. ``width``: the terminal's columns, every line fits; None (a pipe, a
    file): the layout of DEFAULT_WIDTH. ``paint``: colour, on a terminal only."""
    terminal = width
    width = width or DEFAULT_WIDTH
    out = ["envcheck %s · %s" % (report.envcheck_version, report.created), ""]
    out += _fit(environment_lines(report).splitlines(), width) if terminal \
        else [environment_lines(report)]
    out += ["", _checks_table(report, terminal, paint, strict), ""]
    out += _todo_lines(report, width, terminal, paint, strict)
    tail = summary_line(report, strict)
    for note in (report.plan or {}).get("notes") or []:
        out.extend(textwrap.wrap("note: %s" % note, width, subsequent_indent="      ")
                   if terminal else ["note: %s" % note])
    style = _summary_style(report, strict)
    out.extend(paint(line, style) for line in
               (textwrap.wrap(tail, width, subsequent_indent="  ") if terminal else [tail]))
    return "\n".join(out) + "\n"
