"""JUnit XML for CI test tabs: one ``<testcase>`` per check.

The shape is the de-facto JUnit schema that Jenkins, GitLab, GitHub test-report actions
and pytest's ``--junitxml`` share: ``<testsuites>`` > ``<testsuite>`` (tests, failures,
errors, skipped, time, timestamp, hostname) > ``<properties>`` and ``<testcase
classname name time>``, a testcase holding at most one of ``<failure message type>`` or
``<skipped message>``, then ``<system-out>``.

- classname is the probe, name is the check;
- ``failed``, ``hang`` and ``crash`` are ``<failure type="OUTCOME">``: message is the
  check's detail, the text is the error traceback, or the ranks' stacks and stderr for a
  hang or crash, with the failing ranks and their hosts listed first;
- ``skipped`` is ``<skipped message=REASON>``;
- a *known issue* (the matrix expected this failure, verdict ``known``) is
  ``<skipped message="known issue: ...">`` with the advice and source as its text, so it
  shows in the test tab without failing the pipeline — the same rule as the exit code.
  With ``strict`` (``--strict``) it is a ``<failure>`` like any other;
- a check the matrix expected to fail but which passed (verdict ``fixed``) passes, with a
  note in ``<system-out>``.

Everything the environment header of the table shows goes in ``<properties>``.
"""

import datetime
import re
import xml.etree.ElementTree as ET

from ..core.outcomes import Outcome
from ..core.text import ELLIPSIS, rank_set
from . import header, vocabulary

# XML 1.0 forbids most control characters; tracebacks and stderr tails can hold them
# (ANSI colours, NUL from a crashed rank), and one would make the whole file unreadable.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text):
    if text is None:
        return ""
    text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes a rank passed on: keep them, escaped
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _INVALID_XML.sub("", text)


def _seconds(value):
    return "%.3f" % value if value is not None else "0.000"


def _timestamp(created):
    """ISO 8601 without a zone: the JUnit schema's timestamp has none, so UTC."""
    try:
        when = datetime.datetime.fromisoformat(created)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return when.isoformat(timespec="seconds")


def hosts_of(report):
    return {r.get("rank"): r.get("host") for r in report.ranks or []}


def rank_lines(report, check, said=None):
    """'ranks 0–3 on node-b: failed — detail' for the ranks whose outcome was bad, ranks
    that say the same thing in one line; a detail equal to ``said`` (already shown just
    above) is not repeated."""
    hosts = hosts_of(report)
    groups = {}
    for key, entry in sorted((check.ranks or {}).items(), key=lambda kv: int(kv[0])):
        if not Outcome(entry.get("outcome", "skipped")).is_bad:
            continue
        story = (entry["outcome"], " ".join((entry.get("detail") or "").split()))
        groups.setdefault(story, []).append(int(key))
    lines = []
    for (outcome, detail), ranks in groups.items():
        where = sorted({hosts.get(r) for r in ranks if hosts.get(r)})
        repeated = said is not None and _same_words(detail, " ".join(said.split()))
        lines.append("%s%s: %s%s" % (rank_set(ranks), " on %s" % ", ".join(where)
                                     if where else "", outcome,
                                     "" if repeated else " — " + detail))
    return lines


def _same_words(detail, said):
    """Whether ``detail`` says ``said`` again, whole or cut short (with the ellipsis)."""
    if detail.endswith(ELLIPSIS):
        return said.startswith(detail[:-len(ELLIPSIS)])
    return detail in (said, "")


def failure_text(report, check):
    """What a CI log should show under a failed check: where, why, and the evidence."""
    parts = []
    word = vocabulary.verdict(check)
    if word:  # the same word as the table's verdict column, and what it means
        parts.append("verdict: %s (%s)" % (word.word, word.meaning))
    parts.append("\n".join(rank_lines(report, check)))
    if check.advice:
        parts.append("advice: %s" % check.advice)
    # A probe's own verdict (CheckFailed) has a traceback into envcheck: its message is
    # the story. A real exception's traceback is the evidence.
    if check.error and check.error.get("traceback") and not vocabulary.is_internal(check.error):
        parts.append(check.error["traceback"].rstrip())
    elif check.error and check.error.get("message"):
        parts.append(vocabulary.error_line(check.error))
    for key, entry in sorted((check.ranks or {}).items(), key=lambda kv: int(kv[0])):
        for field, title in (("stack", "Python stacks"), ("stderr_tail", "stderr (tail)")):
            text = (entry.get(field) or "").strip()
            if text:
                parts.append("--- rank %s %s ---\n%s" % (key, title, text))
    return "\n\n".join(p for p in parts if p)


def properties(report):
    f = header.facts(report)
    props = list(f.items())
    # Secrets are already redacted when the environment is collected.
    env = report.environment or {}
    props += [("env.%s" % k, v) for k, v in sorted((env.get("env") or {}).items())]
    return [(k, "" if v is None else str(v)) for k, v in props]


def _testcase(report, check, strict):
    case = ET.Element("testcase", classname=check.probe, name=check.check,
                      time=_seconds(check.seconds))
    outcome = Outcome(check.outcome)
    kind = None
    if outcome.is_bad and check.verdict == "known" and not strict:
        kind = "skipped"
        el = ET.SubElement(case, "skipped", message=_clean("%s: %s" % (
            vocabulary.VERDICTS["known"].word, check.detail or check.outcome)))
        notes = [check.advice and "advice: %s" % check.advice]
        source = (check.expectation or {}).get("source")
        notes.append(source and "source: %s" % source)
        notes.append(failure_text(report, check))
        el.text = _clean("\n\n".join(n for n in notes if n))
    elif outcome.is_bad:
        kind = "failure"
        label = check.outcome if check.verdict != "known" else "%s (%s, --strict)" % (
            check.outcome, vocabulary.VERDICTS["known"].word)
        el = ET.SubElement(case, "failure", message=_clean(check.detail or check.outcome),
                           type=label)
        el.text = _clean(failure_text(report, check))
    elif outcome is Outcome.SKIPPED:
        kind = "skipped"
        ET.SubElement(case, "skipped", message=_clean(check.detail or "skipped"))
    out = []
    if check.verdict == "fixed":
        out.append("the matrix expects this check to fail here, but it passed: "
                   "the matrix may be stale")
    if check.detail and kind != "failure":
        out.append(check.detail)
    if out:
        ET.SubElement(case, "system-out").text = _clean("\n".join(out))
    return case, kind


def render(report, strict=False):
    """The JUnit XML document for ``report``, as text."""
    cases = [_testcase(report, c, strict) for c in report.checks]
    failures = sum(1 for _, kind in cases if kind == "failure")
    skipped = sum(1 for _, kind in cases if kind == "skipped")
    hosts = sorted({r.get("host") for r in report.ranks or [] if r.get("host")})
    total = _seconds(report.duration_s)
    counts = dict(tests=str(len(cases)), failures=str(failures), errors="0",
                  skipped=str(skipped), time=total)
    root = ET.Element("testsuites", name="envcheck", **counts)
    suite_attrs = dict(name="envcheck", **counts)
    stamp = _timestamp(report.created)
    if stamp:
        suite_attrs["timestamp"] = stamp
    if hosts:
        suite_attrs["hostname"] = ",".join(hosts)
    suite = ET.SubElement(root, "testsuite", **suite_attrs)
    props = ET.SubElement(suite, "properties")
    for name, value in properties(report):
        ET.SubElement(props, "property", name=name, value=_clean(value))
    for case, _ in cases:
        suite.append(case)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + \
        ET.tostring(root, encoding="unicode") + "\n"
