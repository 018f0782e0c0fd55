"""Advice in the words of the user's framework, where the ranks can see it installed.

Runs after the verdicts (``matrix.verdicts.apply``): a check that went wrong, judged by
a matrix entry with ``framework_advice``, gets that advice for every framework the
ranks' interpreter has (``environment.frameworks``), after the general advice.
"""

from ..core.frameworks import FRAMEWORKS
from ..core.outcomes import Outcome


def phrase(variants, present, how):
    """['with Lightning 2.5.1 (installed here): …', ...]: the advice ``variants``
    ({framework: advice}) has for each framework in ``present`` ({framework: version or
    ""}), in FRAMEWORKS order; ``how`` says how envcheck knows it is there."""
    out = []
    for key, framework in FRAMEWORKS.items():
        if key in present and variants.get(key):
            version = " %s" % present[key] if present[key] else ""
            out.append("with %s%s (%s): %s" % (framework.name, version, how, variants[key]))
    return out


def lines(check, environment):
    """['With Lightning (installed here): DDPStrategy(timeout=…)', ...]."""
    variants = (check.expectation or {}).get("framework_advice") or {}
    installed = (environment or {}).get("frameworks") or {}
    return phrase(variants, installed, "installed here")


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
