"""``envcheck run`` explains its own failing checks with the matrix's failure signatures.

A check that went wrong and that no expected failure explains (verdict ``failure`` or
``unexpected``) is read as ``envcheck explain`` reads a log: its error (type, message,
traceback), its detail and each rank's detail, error and stderr tail. The first cause
found becomes the check's ``diagnosis`` (signature, cause, advice, sources, the line that
shows it), and its advice when the probe gave none or only a general one. So a real NCCL init failure on a GPU
node is explained by a run exactly as by a job's log: one knowledge base.
"""

from ..core.outcomes import Outcome
from ..matrix.framework_advice import phrase
from ..matrix.verdicts import MISMATCH
from ..run.merge import SETUP_FALLBACK
from . import line as line_mod, match

DIAGNOSED = ("failure", "unexpected")


def _texts(check):
    """Everything a check says about how it failed, as lines."""
    parts = []

    def error(e):
        if e:
            parts.append("%s: %s" % (e.get("type") or "", e.get("message") or ""))
            parts.append(e.get("traceback") or "")

    error(check.error)
    parts.append(check.detail or "")
    for detail in (check.ranks or {}).values():
        if isinstance(detail, dict):
            error(detail.get("error"))
            parts += [detail.get("detail") or "", detail.get("stderr_tail") or ""]
    for text in parts:
        yield from str(text).splitlines()


def diagnosis(check, matrix, environment=None):
    """The diagnosis of one check (a dict), or None when no signature matches."""
    matcher = match.Matcher(matrix.signatures)
    for number, text in enumerate(_texts(check), 1):
        matcher.feed(line_mod.parse(number, text.encode("utf-8", "replace")), check.id)
    findings, _ = matcher.results()
    if not findings:
        return None
    f = findings[0]
    s = f.signature
    installed = (environment or {}).get("frameworks") or {}
    return {"signature": s.id, "cause": s.cause, "advice": s.advice, "sources": [s.source],
            "line": f.line.shown, "gpu_only": s.gpu,
            "framework_advice": phrase(dict(s.framework_advice), installed, "installed here")}


def diagnose(report, matrix):
    """Set ``diagnosis`` (and advice, where the probe gave none) on every check that went
    wrong without an explanation from the matrix's expectations; returns the report."""
    for check in report.checks:
        if not Outcome(check.outcome).is_bad or check.verdict not in DIAGNOSED:
            continue
        found = diagnosis(check, matrix, report.environment)
        check.diagnosis = found
        if not found:
            continue
        # The cause the failure's text names leads over advice that says nothing of it:
        # none, init_process_group's general fallback (seen on an H200: a rank without
        # a GPU of its own was told to check MASTER_ADDR), or the matrix's note that the
        # failure is not the one it expects (kept after it).
        mismatch = (check.advice or "").startswith(MISMATCH)
        if not check.advice or check.advice == SETUP_FALLBACK or mismatch:
            check.advice = "\n".join(["%s: %s (source: %s)" % (
                found["cause"], found["advice"], found["sources"][0])]
                + found["framework_advice"] + ([check.advice] if mismatch else []))
    return report
