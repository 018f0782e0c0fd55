"""Advice in the words of the user's framework, where the ranks can see it installed.

Runs after the verdicts (``matrix.verdicts.apply``): a check that went wrong, judged by
a matrix entry with ``framework_advice``, gets that advice for every framework the
ranks' interpreter has (``environment.frameworks``), after the general advice.
"""

from ..core.frameworks import FRAMEWORKS
from ..core.outcomes import Outcome


def lines(check, environment):
    """['With Lightning (installed here): DDPStrategy(timeout=…)', ...]."""
    variants = (check.expectation or {}).get("framework_advice") or {}
    installed = (environment or {}).get("frameworks") or {}
    out = []
    for key, framework in FRAMEWORKS.items():
        if key in installed and variants.get(key):
            version = " %s" % installed[key] if installed[key] else ""
            out.append("with %s%s (installed here): %s" % (framework.name, version,
                                                            variants[key]))
    return out


def advise(report):
    """Add each check's framework advice to its advice (once); returns the report."""
    for check in report.checks:
        if not Outcome(check.outcome).is_bad:
            continue
        extra = [line for line in lines(check, report.environment)
                 if line not in (check.advice or "")]
        if extra:
            check.advice = "\n".join(([check.advice] if check.advice else []) + extra)
    return report
