"""The doctor-style screen: environment header, a line per check, then what to do."""

import re

from tabulate import tabulate

from ..core.outcomes import Outcome, exit_code
from ..core.text import cut, rank_set, shorten, wrap
from ..report import model_answer
from . import header, model_block, vocabulary
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
    lines = wrap(text, width - len(indent), initial_indent=indent,
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
DETAIL_VERBOSE = 50  # -v on a terminal: a narrower column cuts too much; lines under rows


def _fit(lines, width):
    """Cut what still overflows (a long path in the header) with the one ellipsis."""
    return [cut(line, width) for line in lines]


def _checks_table(report, width, paint=PLAIN, strict=False, verbose=False):
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
    if width and room < (DETAIL_VERBOSE if verbose else DETAIL_AT_LEAST):
        # Too narrow for a detail column: what did not pass gets its detail on a line of
        # its own under the row, from the check column on.
        indent = " " * (fixed[1].index(" ") + 2)
        out = fixed[:2]
        for line, c in zip(fixed[2:], report.checks):
            out.append(line)
            if c.detail and verbose:  # every detail, wrapped
                out.extend(_wrap(c.detail, width, indent))
            elif c.detail and c.outcome != "passed":
                out.append(indent + shorten(c.detail, width - len(indent)))
        return "\n".join(out)
    if not width and verbose:
        room = DETAIL_IN_FILES * 2
    details = [shorten(c.detail, room) for c in report.checks]
    return tabulate([r + [d] for r, d in zip(rows, details)], headers=headers + ["detail"])


def _entry_lines(c, width, terminal, paint, strict):
    """A check in full: what happened, the error, the advice, the source, and where every
    rank was when it hung."""
    glyph = vocabulary.outcome(c).glyph
    out = ["  %s %s (%s)" % (paint(glyph, vocabulary.style(c, strict)), c.id,
                             paint(vocabulary.label(c), vocabulary.style(c, strict)))]
    said, error_line = story(c)
    out.extend(_wrap(said, width, "      ", max_lines=6))
    if error_line:
        out.extend(_wrap(error_line, width, "      ", max_lines=3))
    for paragraph in (c.advice or "").split("\n"):  # the general fix, then a framework's
        advice = wrap(paragraph, width - 6, initial_indent="    → ",
                               subsequent_indent="      ")
        if advice:
            out.extend([advice[0].replace("→", paint("→", "cyan"), 1)] + advice[1:])
    if c.expectation and c.expectation.get("source"):
        out.extend(_wrap("source: %s" % c.expectation["source"], width, "      "))
    if c.outcome == "hang":
        out.extend(_fit(whereabouts_lines(c, "      "), width) if terminal
                   else whereabouts_lines(c, "      "))
        out.append("      full Python stacks: --json PATH, checks[].ranks[].stack")
    return out


def _action(report, strict):
    """What needs action, most urgent first: unexpected failures, then failures the
    matrix has no word on, then the rest that fails the run."""
    order = {k: i for i, k in enumerate(vocabulary.SUMMARY_ORDER)}
    bad = [c for c in report.checks if vocabulary.fails_run(c, strict)]
    return sorted(bad, key=lambda c: order.get(c.verdict, len(order)))


def _todo_lines(report, width, terminal, paint, strict):
    """-v: every check that did not simply pass, in full; what fails the run first."""
    action = _action(report, strict)
    rest = [c for c in report.checks if c not in action and (
        Outcome(c.outcome).is_bad or c.verdict in ("known", "fixed"))]
    if not action and not rest:
        return []
    out = [paint("What to do:", "bold")]
    for c in action + rest:
        out.extend(_entry_lines(c, width, terminal, paint, strict))
    return out + [""]


def pitfall_text(c):
    """A known issue in a few words: its advice's gist ('do not deepcopy a model that
    stores a process group'), else what happened; for a setup check, which is about the
    host, what it found there first ('TMPDIR=/x on node1 cannot be written (...)')."""
    gist = vocabulary.advice_gist(c.advice)
    if c.probe == "setup" and c.detail:
        found = " ".join(c.detail.split(": ")[0].split())
        return "%s: %s" % (found, gist) if gist else found
    return gist or " ".join(story(c)[0].split())


# Probes whose known issues are about the hosts (what differs between them, their
# limits), not something the user's code must avoid: listed under a heading of their
# own, with the setup checks that can be a warning (a TMPDIR Python passes over).
HOST_PROBES = ("hosts",)
HOST_CHECKS = ("setup.tmpdir",)


def _host_issue(c):
    return c.probe in HOST_PROBES or c.id in HOST_CHECKS


def _model_failures(report):
    """The ids of the checks the model block (``render/model_block``) already shows as
    what the user's model fails: not listed again among the general pitfalls."""
    found = model_answer.answer(report)
    return {cid for c in (found or {}).get("capabilities", ())
            if c["status"] == model_answer.FAILS for cid in c["checks"]}


def _pitfall_lines(report, width, paint, strict):
    """The known issues, an entry each (checks of a probe with the same advice as one):
    what the user's code must avoid, then what differs between the hosts; -v has the
    whole advice and its sources. What the user's model fails is in its own block."""
    out = []
    shown = _model_failures(report)
    known = ("Other known" if shown else "Known") + " torch pitfalls (%d)%s: what your " \
        "code must avoid"
    for hosts, title in ((False, known),
                         (True, "Known warnings about the hosts (%d)%s")):
        checks = [c for c in report.checks
                  if vocabulary.is_pitfall(c) and _host_issue(c) == hosts and c.id not in shown]
        out += _known_group(checks, title, width, paint, strict)
    return out


def _known_group(checks, title, width, paint, strict):
    groups = {}
    for c in checks:
        groups.setdefault((c.probe, pitfall_text(c)), []).append(c)
    if not groups:
        return []
    n = sum(len(g) for g in groups.values())
    known = vocabulary.VERDICTS["known"]
    style = "bold red" if strict else known.style
    head = (title + "; -v: advice, sources") % (n, ", failing under --strict" if strict
                                                 else "")
    out = [paint(head if len(head) <= width else head.split(";")[0], "bold")]
    for (probe, text), checks in groups.items():
        names = "%s.%s" % (probe, ", ".join(c.check for c in checks))
        lines = wrap("%s: %s" % (names, text), width - 4,
                              subsequent_indent="    ")
        out.append("  %s %s" % (paint(known.glyph, style), lines[0]))
        out.extend("  " + line for line in lines[1:])
    return out + [""]


def _fixed_lines(report, width, paint):
    fixed = [c for c in report.checks if c.verdict == "fixed"]
    if not fixed:
        return []
    word = vocabulary.VERDICTS["fixed"]
    out = [paint("Passed, although the matrix expects a failure (-v: why):", "bold")]
    out += ["  %s %s (%s)" % (paint(word.glyph, word.style), c.id, word.word) for c in fixed]
    return out + [""]


def probe_lines(report, strict=False, paint=PLAIN):
    """A line per probe, as the live view leaves them: '! serialization  5 passed, 4 known
    issues  0.07 s'."""
    probes = {}
    for c in report.checks:
        probes.setdefault(c.probe, []).append(c)
    out = []
    for name, checks in probes.items():
        glyph, style, text = vocabulary.probe_line_parts(checks, strict)
        seconds = sum(c.seconds or 0.0 for c in checks)
        out.append("%s %-14s %s  %s" % (paint(glyph, style), name, text,
                                        paint("%.2f s" % seconds, "dim")))
    return out


def verdict_lines(report, strict=False, paint=PLAIN):
    """The answer, first: can training run here, on which backend and how many ranks."""
    f = header.facts(report)
    where = "backend %s, %s rank%s on %s" % (
        f["backend"] or "?", f["world_size"] or "?", "" if f["world_size"] == 1 else "s",
        (f["hosts"] or "?").replace(",", ", "))
    failing = exit_code(report.checks, None, strict)
    parts = [text for text, _ in vocabulary.summary_parts(report.checks, strict)]
    if report.interrupted:
        return [paint("! Interrupted by %s: the report is partial" % report.interrupted,
                      "bold yellow"), "  " + where]
    if failing:
        bad = [p for p in parts if p != "nothing unexpected"]
        return [paint("✗ Not ready for distributed training: %s" % ", ".join(bad),
                      "bold red"), "  " + where]
    out = [paint("✓ Ready for distributed training: %s" % where, "bold green")]
    model = _model_failures(report)
    known = sum(1 for c in report.checks if vocabulary.is_pitfall(c) and not _host_issue(c)
                and c.id not in model)
    hosts = sum(1 for c in report.checks if vocabulary.is_pitfall(c) and _host_issue(c))
    said = []  # a line each: an 80-column screen has no room for both on one
    if known:
        said.append("%d known torch pitfall%s your code must avoid (below)" % (
            known, "" if known == 1 else "s"))
    if hosts:
        said.append("%d known warning%s about the hosts (below)" % (
            hosts, "" if hosts == 1 else "s"))
    if model:  # the model's failures are the finding (above), not "nothing unexpected"
        said = [s.replace(" known", " other known", 1) for s in said]
        out.append("  the node: nothing unexpected")
        out.extend("  " + line for line in said)
    elif said:
        out.append("  nothing unexpected; " + said[0])
        out.extend("  " + line for line in said[1:])
    return out


def answer(report, strict=False):
    """The run's answer as data: its exit code, whether training can run here, and the
    screen's first line (with where, when it is on a line of its own)."""
    code = int(exit_code(report.checks, report.interrupted, strict))
    lines = [line.strip() for line in verdict_lines(report, strict)]
    text = lines[0].lstrip("✓✗! ")
    if (code or report.interrupted) and len(lines) > 1:
        text += " (%s)" % lines[1]
    return {"exit_code": code, "ready": code == 0 and not report.interrupted,
            "text": text, "strict": bool(strict)}


def summary_line(report, strict=False):
    """'28 passed, 6 known issues, 6 skipped in 10.1 s; nothing unexpected': markdown's
    second line (the screen ends with ``tally_line``). A failure the matrix expects is
    counted as the known issue it is, as on the screen, never as 'failed' under a ✅."""
    tail = "%s in %.1f s" % (vocabulary.tally(report.checks), report.duration_s)
    if report.interrupted:
        tail += " — INTERRUPTED by %s, report is partial" % report.interrupted
    elif any(c.verdict for c in report.checks):
        said = [text for text, _ in vocabulary.summary_parts(report.checks, strict)
                if strict or not text.split(" ", 1)[1].startswith("known")]
        tail += "; " + ", ".join(said)
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


def tally_line(report, strict=False):
    """The screen's last line, the verdict first: 'nothing unexpected: 28 passed, 6 known
    issues, 6 skipped in 2.7 s'."""
    tail = "%s in %.1f s" % (vocabulary.tally(report.checks), report.duration_s)
    if report.interrupted:
        return "INTERRUPTED by %s, report is partial: %s" % (report.interrupted, tail)
    if any(c.verdict for c in report.checks):
        said = [(text, style) for text, style in
                vocabulary.summary_parts(report.checks, strict)
                if strict or not text.split(" ", 1)[1].startswith(("known", "fixed"))]
        return "%s: %s" % (", ".join(text for text, _ in said), tail)
    return tail


def render(report, width=None, strict=False, paint=PLAIN, verbose=False,
           probes_shown=False):
    """The screen. ``width``: the terminal's columns, every line fits; None (a pipe, a
    file): the layout of DEFAULT_WIDTH. ``paint``: colour, on a terminal only.

    The answer comes first (can training run here), then what needs action, most urgent
    first, in full; then the known torch pitfalls, an entry each; then the environment
    and a line per probe (``probes_shown``: the live view left those on the screen
    already). ``verbose``: a row per check with its detail, and every piece of advice
    in full."""
    terminal = width
    width = width or DEFAULT_WIDTH
    fit = (lambda lines: _fit(lines, width)) if terminal else (lambda lines: lines)
    out = model_block.lines(report, width, paint, strict)  # wrapped to the width already
    out += fit(verdict_lines(report, strict, paint)) + [""]
    action = _action(report, strict)
    title = ["envcheck %s · %s" % (report.envcheck_version, report.created)]
    if verbose:
        out += title + fit(environment_lines(report).splitlines())
        out += ["", _checks_table(report, terminal, paint, strict, verbose=True), ""]
        out += _todo_lines(report, width, terminal, paint, strict)
    else:
        if action:
            out.append(paint("Needs action:", "bold"))
            for c in action:
                out.extend(_entry_lines(c, width, terminal, paint, strict))
            out.append("")
        out += _pitfall_lines(report, width, paint, strict)
        out += _fixed_lines(report, width, paint)
        out += title + fit(environment_lines(report).splitlines()) + [""]
        if not probes_shown:
            out += fit(probe_lines(report, strict, paint)) + [""]
    for note in (report.plan or {}).get("notes") or []:
        out.extend(wrap("note: %s" % note, width, subsequent_indent="      ")
                   if terminal else ["note: %s" % note])
    style = _summary_style(report, strict)
    tail = tally_line(report, strict)
    out.extend(paint(line, style) for line in
               (wrap(tail, width, subsequent_indent="  ") if terminal else [tail]))
    return "\n".join(out) + "\n"
