"""Judge each check's outcome against the matrix, like pytest's xfail.

| outcome        | expected pass | expected failure           | no expectation |
|----------------|---------------|----------------------------|----------------|
| passed         | ok            | fixed (matrix stale?)      | new            |
| failed/hang/…  | unexpected    | known, if the outcome and  | failure        |
|                |               | message pattern match;     |                |
|                |               | otherwise unexpected       |                |

An entry may allow both (``outcome = ["passed", "failed"]``) where the outcome depends
on something the matrix cannot see, such as the user's ``--model``: a pass is ok, a
failure must still match. A skipped check proved nothing either way, so it gets no
verdict. An expected failure
must match the *same* bad outcome (a hang where a clean failure was expected is
unexpected) and, when the entry has one, its message pattern — a different error than
the one the matrix knows about is a real failure, as in pytest's ``raises=``.

A release no entry's range covers, between two observed releases on which the check
behaved the same (same outcome and message pattern, in this environment), is judged as
on them: its expectation says ``between = [lower, upper]``. Without such neighbours it
has no data (``new`` / ``failure``).

An entry marked ``unsupported`` (this torch on this Python or NumPy: a combination torch
does not support) turns a matching failure into verdict ``unsupported``, whose advice
names the Pythons the release supports (``releases.toml``). It fails the run like
``unexpected``: the fix is the environment, not user code.

A check that compares several things at once (``hosts.skew``: torch, NCCL, numpy, each
variable...) lists what it found in its root rank's ``data["findings"]``, one sentence
each, and each finding is judged on its own, as ``CheckFailed: <finding>``, by the
entries that carry a message pattern: an entry that allows a failure makes it known (a
warning), a pass-only entry makes it harmless, and a finding no pattern matches is
unexpected (the check's premise, its entry without a pattern, is that nothing differs).
The check's verdict is its worst finding's; a check whose findings are all harmless
passed.
"""

import dataclasses

from .values import Target
from ..core.outcomes import Outcome, Verdict
from ..core.text import rank_set

# The advice of a failure other than the one the matrix expects: explain.diagnose puts
# the cause its text names before it.
MISMATCH = "the matrix expects a different failure here"


def error_text(check):
    """What a message pattern is searched in: 'Type: message', else the detail."""
    err = check.error or {}
    if err.get("message") is not None or err.get("type"):
        return "%s: %s" % (err.get("type") or "", err.get("message") or "")
    return check.detail or ""


def judge(check, applicable):
    """(verdict, expectation used or None) for one CheckResult."""
    outcome = Outcome(check.outcome)
    if outcome == Outcome.SKIPPED:
        return None, None
    if not applicable:
        return (Verdict.NEW if outcome == Outcome.PASSED else Verdict.FAILURE), None
    if outcome == Outcome.PASSED:
        passing = next((e for e in applicable if e.allows_pass), None)
        if passing:
            return Verdict.OK, passing
        return Verdict.FIXED, applicable[0]
    text = error_text(check)
    for e in applicable:  # unsupported combinations first (Matrix.applicable's order)
        if outcome.value in e.outcome and e.matches_message(text):
            return (Verdict.UNSUPPORTED if e.unsupported else Verdict.KNOWN), e
    failing = next((e for e in applicable if e.expects_failure), applicable[0])
    return Verdict.UNEXPECTED, failing


def findings_of(check):
    """The root rank's list of findings (strings), or None."""
    if check.root_rank is None or not check.ranks:
        return None
    data = (check.ranks.get(str(check.root_rank)) or {}).get("data") or {}
    found = data.get("findings") if isinstance(data, dict) else None
    if isinstance(found, list) and found and all(isinstance(f, str) for f in found):
        return found
    return None


_RANK = {Verdict.OK: 0, Verdict.KNOWN: 1, Verdict.UNEXPECTED: 2}


def judge_findings(findings, applicable):
    """(verdict, entry, [{finding, verdict, file, entry, source}]): each finding by the first
    entry whose message pattern matches it; the worst one decides."""
    premise = next((e for e in applicable if e.allows_pass and e.message is None),
                   applicable[0])
    judged = []
    for text in findings:
        entry = next((e for e in applicable if e.message is not None
                      and e.matches_message("CheckFailed: " + text)), None)
        if entry is None:
            verdict, entry = Verdict.UNEXPECTED, premise
        else:
            verdict = Verdict.KNOWN if entry.expects_failure else Verdict.OK
        judged.append((verdict, entry, text))
    worst = max(judged, key=lambda j: _RANK[j[0]])
    return worst[0], worst[1], [
        {"finding": t, "verdict": v.value, "file": e.where.file, "entry": e.where.index,
         "source": e.source}
        for v, e, t in judged]


def _fixed_advice(e):
    return ("the matrix expects %s here (%s entry %d) but it passed: the matrix may be "
            "stale for this build, or this environment differs; if it keeps passing, "
            "narrow that entry's range" % ("/".join(e.outcome), e.where.file, e.where.index))


def unsupported_advice(entry, matrix, target):
    """The entry's advice, then which Pythons this torch supports (from the release's
    facts) when the entry is about the Python."""
    advice = entry.advice or ""
    release = matrix.release(target.torch) if target is not None else None
    if entry.python is not None and release is not None:
        advice += "%storch %s supports Python %s%s" % (
            "; " if advice else "", release.series, ", ".join(release.supported_pythons),
            " (this is %s)" % target.python if target.python else "")
    return advice or None


# How much a verdict weighs when the ranks of one check failed in different words.
_SEVERITY = {Verdict.OK: 0, Verdict.NEW: 0, Verdict.FIXED: 1, Verdict.KNOWN: 2,
             Verdict.UNSUPPORTED: 3, Verdict.FAILURE: 3, Verdict.UNEXPECTED: 4}


def _worst_rank(check, applicable, verdict, entry):
    """(verdict, entry) of the check's worst failing rank. The merge tells a check's
    story from one rank (the first that failed); where other ranks failed with other
    words — one host's /dev/shm full, another's merely small — each is judged, and the
    worst decides: the check then tells that rank's story, host and all."""
    if verdict is None or not Outcome(check.outcome).is_bad or not check.ranks:
        return verdict, entry
    seen = {error_text(check)}
    for key, rank in sorted(check.ranks.items(), key=lambda kv: int(kv[0])):
        if not isinstance(rank, dict) or rank.get("outcome") != check.outcome:
            continue
        other = dataclasses.replace(check, error=rank.get("error"),
                                    detail=rank.get("detail") or "")
        text = error_text(other)
        if text in seen:
            continue
        seen.add(text)
        theirs, their_entry = judge(other, applicable)
        if theirs is not None and _SEVERITY[theirs] > _SEVERITY[verdict]:
            verdict, entry = theirs, their_entry
            same = sorted(int(k) for k, r in check.ranks.items()
                          if isinstance(r, dict) and r.get("outcome") == check.outcome
                          and error_text(dataclasses.replace(
                              check, error=r.get("error"), detail=r.get("detail") or ""))
                          == text)
            check.root_rank = int(key)
            check.error, check.advice = rank.get("error"), rank.get("advice")
            detail = rank.get("detail") or ""
            check.detail = detail if detail.startswith("rank") else "%s: %s" % (
                rank_set(same), detail)
    return verdict, entry


def apply(report, matrix):
    """Set every check's verdict and expectation, and ``report.matrix``; returns it."""
    backend = report.ranks[0].get("backend") if report.ranks else None
    model = bool(((report.plan or {}).get("options") or {}).get("model"))
    target = Target.from_environment(report.environment, backend, model)
    for check in report.checks:
        applicable = matrix.applicable(check.id, target)
        between = None if applicable else matrix.between(check.id, target)
        if between:
            # No range covers this release, but both observed neighbours agree: judged
            # as on them, and the report says so (not "no data", not a guess either).
            applicable = [between[0]]
        findings = findings_of(check) if applicable and check.outcome in (
            Outcome.FAILED.value, Outcome.PASSED.value) else None
        judged = None
        if findings:
            verdict, entry, judged = judge_findings(findings, applicable)
            # Differences the matrix calls harmless do not fail the check.
            check.outcome = (Outcome.PASSED if verdict == Verdict.OK else Outcome.FAILED).value
        else:
            verdict, entry = judge(check, applicable)
            verdict, entry = _worst_rank(check, applicable, verdict, entry)
        check.verdict = verdict.value if verdict else None
        check.expectation = entry.to_dict() if entry else None
        if judged:
            check.expectation["findings"] = judged
        if between and entry is not None:
            check.expectation["between"] = [between[1], between[2]]
        if judged and verdict == Verdict.KNOWN and entry.advice \
                and entry.advice not in (check.advice or ""):
            # The probe's advice says what to fix ("make node2 match the other hosts
            # (numpy): pip install ..."); the matrix's how much that matters (a warning,
            # unconfirmed): it joins the head, which is what a summary line shows.
            head, sep, rest = (check.advice or "").partition(": ")
            check.advice = "%s, %s%s%s" % (head, entry.advice, sep, rest) if head \
                else entry.advice
        elif verdict == Verdict.UNSUPPORTED:
            # The probe's advice is about the failure; the fix is the environment.
            check.advice = unsupported_advice(entry, matrix, target)
        elif verdict == Verdict.KNOWN and entry.advice and not check.advice:
            # The probe's own advice names what it saw (the classes to allowlist...);
            # the matrix's is the general fix, for probes that give none.
            check.advice = entry.advice
        elif verdict == Verdict.FIXED:
            check.advice = _fixed_advice(entry)
        elif verdict == Verdict.UNEXPECTED and entry.expects_failure and not check.advice:
            check.advice = (MISMATCH + " (%s entry %d: %s); "
                            "this one is new" % (entry.where.file, entry.where.index,
                                                 entry.message.pattern if entry.message
                                                 else "/".join(entry.outcome)))
    report.matrix = matrix.describe()
    report.matrix["target"] = None if target is None else {
        "torch": str(target.torch), "variant": target.variant, "python": target.python,
        "platform": target.platform, "backend": target.backend, "model": target.model,
        "numpy": target.numpy}
    return report
