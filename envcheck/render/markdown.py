"""Markdown for ``$GITHUB_STEP_SUMMARY`` (and any other place that renders GFM).

Same content as the table: a headline, the environment, a table row per check, then
what to do. Cells are escaped (``|`` would split a row, a newline would end the table,
``<`` would open an HTML tag).
"""

from ..core.outcomes import Outcome
from ..core.text import shorten
from . import header, vocabulary
from .junit import rank_lines
from .table import story, summary_line, whereabouts_lines


DETAIL_LIMIT = 120  # a table cell; "What to do" has the whole detail


def cell(text):
    text = "" if text is None else str(text)
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split())


def _icon(check, strict):
    return vocabulary.icon(check, strict)


def _headline(report, strict):
    bad = [c for c in report.checks if Outcome(c.outcome).is_bad]
    known = [c for c in bad if c.verdict == "known" and not strict]
    failing = len(bad) - len(known)
    if report.interrupted:
        state = "⚠️ interrupted by %s, partial report" % report.interrupted
    elif failing:
        state = "❌ %d check%s failed" % (failing, "" if failing == 1 else "s")
    else:
        state = "✅ distributed PyTorch works here"
    return "## envcheck: %s\n\n%s" % (state, summary_line(report, strict))


def _environment(report):
    rows = header.rows(report) + [
        ("envcheck", "%s · %s" % (report.envcheck_version, report.created))]
    lines = ["| | |", "|---|---|"]
    lines += ["| **%s** | %s |" % (cell(k), cell(v)) for k, v in rows]
    return "\n".join(lines)


def _table(report, strict):
    has_verdicts = any(c.verdict for c in report.checks)
    head = ["", "probe", "check", "outcome"] + (["verdict"] if has_verdicts else []) + \
        ["time", "detail"]
    lines = ["| %s |" % " | ".join(head), "|%s|" % "|".join("---" for _ in head)]
    for c in report.checks:
        row = [_icon(c, strict), c.probe, c.check, c.outcome]
        if has_verdicts:
            word = vocabulary.verdict(c)
            row.append(word.word if word else c.verdict or "")
        row += ["%.2f s" % c.seconds if c.seconds is not None else "",
                shorten(c.detail, DETAIL_LIMIT)]
        lines.append("| %s |" % " | ".join(cell(v) for v in row))
    return "\n".join(lines)


def _todo(report, strict):
    todo = [c for c in report.checks
            if Outcome(c.outcome).is_bad or c.verdict in ("known", "fixed")]
    if not todo:
        return None
    out = ["### What to do", ""]
    for c in todo:
        said, error = story(c)
        out.append("- %s **%s** (%s): %s" % (_icon(c, strict), cell(c.id),
                                             cell(vocabulary.label(c)), cell(said)))
        for line in rank_lines(report, c, said):
            out.append("  - %s" % cell(line))
        if error:
            out.append("  - error: %s" % cell(shorten(error, 300)))
        out += ["  - → %s" % cell(p) for p in (c.advice or "").split("\n") if p.strip()]
        source = (c.expectation or {}).get("source")
        if source:
            out.append("  - source: %s" % cell(source))
        if c.outcome == "hang":
            out += ["  - %s" % cell(line) for line in whereabouts_lines(c, "")]
            out.append("  - full Python stacks: the JSON report, `checks[].ranks[].stack`")
    return "\n".join(out)


def render(report, strict=False):
    parts = [_headline(report, strict), _environment(report), _table(report, strict)]
    todo = _todo(report, strict)
    if todo:
        parts.append(todo)
    notes = (report.plan or {}).get("notes") or []
    if notes:
        parts.append("\n".join("> note: %s" % cell(n) for n in notes))
    return "\n\n".join(parts) + "\n"
