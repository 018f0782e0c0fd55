"""The words, glyphs and colours of outcomes and verdicts, in one place.

Every renderer reads them here: the table and its summary line, "What to do", the live
view, JUnit and markdown (JSON keeps the enum values, ``passed`` / ``known``, which the
schema fixes). A word is upper case where the verdict fails the run, as pytest's summary
line shouts FAILED and whispers xfailed. Colours (rich styles) are for terminals only:
``render.paint`` decides whether they are used at all.
"""

import dataclasses
import re

from ..core.outcomes import Outcome, Verdict


@dataclasses.dataclass(frozen=True)
class Word:
    word: str  # as the table, the summary line, JUnit and markdown write it
    glyph: str  # the terminal's symbol, in front of the word
    icon: str  # markdown's (GitHub renders emoji, not colour)
    style: str  # rich style on a terminal
    plural: str = None  # "3 known issues"; None: the word as it is ("2 UNEXPECTED")
    meaning: str = ""  # one line for readers of JUnit and the docs

    def count(self, n):
        return "%d %s" % (n, self.word if n == 1 or self.plural is None else self.plural)


OUTCOMES = {
    "passed": Word("passed", "✓", "✅", "green", meaning="the behaviour works"),
    "failed": Word("failed", "✗", "❌", "red", meaning="the behaviour under test did not work"),
    "hang": Word("hang", "⧗", "⏳", "red", meaning="no progress within the timeout"),
    "crash": Word("crash", "✗", "💥", "red", meaning="a rank died"),
    "skipped": Word("skipped", "-", "⏭️", "dim", meaning="not run here, with the reason"),
}

# Keyed by the verdict's JSON value. "unsupported" (torch X does not support Python Y)
# is here before core.outcomes.Verdict names it, so that verdict renders everywhere the
# day it exists.
VERDICTS = {
    "ok": Word("ok", "✓", "✅", "green", meaning="passed, as the matrix expects"),
    "new": Word("new", "✓", "✅", "green",
                meaning="passed; the matrix has no expectation for this build"),
    "known": Word("known issue", "!", "⚠️", "yellow", "known issues",
                  "failed as the matrix expects: a known issue, with its advice"),
    "fixed": Word("fixed?", "?", "ℹ️", "cyan",
                  meaning="passed although the matrix expects a failure: the matrix may be "
                          "stale for this build, or this environment differs"),
    "unexpected": Word("UNEXPECTED", "✗", "❌", "bold red",
                       meaning="the matrix expects a pass (or another failure) here"),
    "failure": Word("FAILURE", "✗", "❌", "bold red", "FAILURES",
                    "did not pass, and the matrix has no expectation for this build"),
    "unsupported": Word("UNSUPPORTED", "✗", "🚫", "bold red",
                        meaning="this torch release does not support this Python"),
}

# The summary line's order: what fails the run first.
SUMMARY_ORDER = ("unexpected", "failure", "unsupported", "known", "fixed")


def outcome(check):
    return OUTCOMES[Outcome(check.outcome).value]


def verdict(check):
    """The check's verdict word, or None when no matrix judged it (or it was skipped)."""
    return VERDICTS.get(check.verdict) if check.verdict else None


def is_bad_verdict(value):
    try:
        return Verdict(value).is_bad
    except ValueError:  # a verdict this envcheck does not know: a newer report
        return False


def label(check):
    """What a check is called in "What to do" and markdown: its verdict word when judged,
    else its outcome ("known issue", "FAILURE", "hang")."""
    v = verdict(check)
    return v.word if v else check.outcome


def style(check, strict=False):
    """The colour of a check's row: its verdict's where the matrix judged it (a known
    issue is yellow, not red, unless --strict makes it fail the run), else its outcome's."""
    v = verdict(check)
    if v is None:
        return outcome(check).style
    if strict and check.verdict == Verdict.KNOWN.value:
        return "bold red"
    return v.style


def icon(check, strict=False):
    """Markdown's emoji for a check: the outcome's, or ⚠️ for a known issue that does not
    fail the run."""
    if check.verdict == Verdict.KNOWN.value and not strict \
            and Outcome(check.outcome).is_bad:
        return VERDICTS["known"].icon
    return outcome(check).icon


def counts(checks):
    found = {}
    for c in checks:
        if c.verdict:
            found[c.verdict] = found.get(c.verdict, 0) + 1
    return found


def summary_parts(checks, strict=False):
    """[(text, style)] for the verdicts: ('2 UNEXPECTED', 'bold red'), ('1 known issue
    (failing under --strict)', ...); 'nothing unexpected' when nothing fails the run."""
    found = counts(checks)
    parts = []
    for key in SUMMARY_ORDER:
        n = found.get(key)
        if not n:
            continue
        word = VERDICTS[key]
        text = word.count(n)
        if key == "known" and strict:
            text += " (failing under --strict)"
        elif key == "fixed":
            text += " (the matrix expected a failure)"
        parts.append((text, "bold red" if key == "known" and strict else word.style))
    if not any(is_bad_verdict(k) for k in found):
        parts.insert(0, ("nothing unexpected", "green"))
    return parts


# A probe's own verdict (ctx.fail raises it), not an exception anyone's code raised: its
# name says nothing to a user, so user text shows its message alone.
INTERNAL_ERRORS = ("CheckFailed",)


def is_internal(error):
    return bool(error) and error.get("type") in INTERNAL_ERRORS


def error_line(error):
    """'RuntimeError: message', or the message alone for a probe's own verdict."""
    error = error or {}
    message = error.get("message") or ""
    if is_internal(error) or not error.get("type"):
        return message
    return "%s: %s" % (error["type"], message)


# envcheck check's glyphs (render.answer): works, will not work, a warning, cannot tell.
CHECK_STYLES = {"✓": "green", "✗": "bold red", "!": "yellow", "?": "cyan"}


_OPEN, _CLOSE = "([{", ")]}"


def clauses(text):
    """[(clause, separator)]: ``text`` cut at its top-level ': ', '; ' and '. ', never
    inside parentheses, brackets, braces or quotes ('(dcp.load raises TypeError: ...)',
    "{k: v.clone() ...}" stay whole). An apostrophe inside a word is not a quote."""
    out, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch in "'\"" and (i == 0 or not text[i - 1].isalnum()):
            quote = ch
        elif depth == 0 and text[i:i + 2] in (": ", "; ", ". "):
            out.append((text[start:i], text[i:i + 2]))
            start = i = i + 2
            continue
        i += 1
    return out + [(text[start:], "")]


ASIDE = 30  # a parenthesis longer than this explains or shows code: -v has it


def without_asides(text):
    """``text`` without its long parenthetical asides (' (launch before building models
    and trainers)'), each taken out whole; a call's parentheses (``state_dict()``) and a
    short aside ('(unconfirmed)') stay."""
    out, i = [], 0
    while i < len(text):
        if text.startswith(" (", i):
            depth, j = 0, i + 1
            while j < len(text):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            if depth == 0 and j - i > ASIDE:
                i = j + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def advice_gist(advice):
    """A known issue as one line that says what to do: the advice's first clause (what
    goes wrong, or the fix itself when the advice starts with it), then, where a colon
    introduces the fix, the fix's first clause ('DDP detects a shape mismatch only on
    the rank whose shapes differ: make every rank build the same model, ...'). The
    clauses between them and the long asides, which explain or show code, are left to
    -v; nothing is cut inside parentheses or quotes. '' without advice."""
    parts = clauses((advice or "").split("\n")[0].strip())
    head = parts[0][0].rstrip(".")
    colon = next((i for i, (_, sep) in enumerate(parts) if sep == ": "), None)
    if colon is not None and parts[colon + 1][0]:
        head = "%s: %s" % (head, parts[colon + 1][0].rstrip("."))
    return without_asides(head)


def fails_run(check, strict=False):
    """Whether this check alone makes the exit code 1 (core.outcomes.exit_code's rule)."""
    if check.verdict is not None:
        return is_bad_verdict(check.verdict) or (strict and check.verdict == Verdict.KNOWN.value)
    return Outcome(check.outcome).is_bad


def is_pitfall(check):
    """A known issue: a failure the matrix expects for this torch, with its advice."""
    return check.verdict == Verdict.KNOWN.value and Outcome(check.outcome).is_bad


# A tally's order: what passed, what the matrix knows, then what happened otherwise.
_TALLY = ("passed", "known", "failed", "hang", "crash", "skipped")


def tally(checks):
    """'28 passed, 6 known issues, 6 skipped': outcomes counted, where a failure the
    matrix expects is counted as the known issue it is, not as 'failed'."""
    found = {}
    for c in checks:
        key = "known" if is_pitfall(c) else Outcome(c.outcome).value
        found[key] = found.get(key, 0) + 1
    return ", ".join((VERDICTS if key == "known" else OUTCOMES)[key].count(found[key])
                     for key in _TALLY if found.get(key))


def probe_line_parts(checks, strict=False):
    """(glyph, style, text) of a probe's one line: '5 passed, 4 known issues', or
    '2 passed, 1 failed; 1 UNEXPECTED' where something fails the run. The glyph and
    colour are those of its most urgent check: a known issue is a yellow '!', not a
    red '✗'."""
    if not checks:
        return OUTCOMES["skipped"].glyph, "dim", "no checks"
    text = tally(checks)
    judged = [part for part, _ in summary_parts(checks, strict)
              if part != "nothing unexpected" and "known issue" not in part]
    if judged:
        text += "; " + ", ".join(judged)
    first = min(checks, key=lambda c: _URGENCY.index(style(c, strict)))
    glyph = VERDICTS["known"].glyph if is_pitfall(first) and not strict \
        else outcome(first).glyph
    return glyph, style(first, strict), text


# Which colour wins when a probe's checks differ: what fails the run first.
_URGENCY = ("bold red", "red", "yellow", "cyan", "green", "dim")
