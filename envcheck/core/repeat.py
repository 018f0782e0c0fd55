"""``--repeat N`` and ``--for DURATION``: the intermittent-fault rounds, as both drivers
take them (``envcheck run`` and launcher mode), and the plan option the ``repeat`` probe
reads (``probes/repeat``). stdlib only: both sides import it.

A link that drops one packet in a hundred passes every single run: TCP hides the loss,
and only now and then does a small collective wait a retransmission timeout for it.
Rounds of the collectives and bandwidth probes, and of small round trips between hosts,
find it: see docs/intermittent.md.
"""

import math
import re

from .errors import UsageError

PROBE = "repeat"
OPTION = "repeat"  # the plan option: {"rounds": N} or {"seconds": S}
DEFAULT_ROUNDS = 10  # -p repeat without --repeat or --for
MAX_ROUNDS = 10000
MAX_SECONDS = 86400  # a day, as the timeouts
# A duration: a number and a unit, or several ("1m30s"); a bare number is seconds.
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)?")
_UNIT = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}
REPEAT_HELP = "Rerun collectives and bandwidth N times: the host that fails now and then."
FOR_HELP = ("As --repeat, for DURATION (90s, 10m, 1h30m) instead of N rounds: rounds "
            "start until it has passed, at least one. See docs/intermittent.md.")


def rounds(text):
    """``--repeat`` as an int; a UsageError quoting the bad value."""
    value = None
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and re.fullmatch(r"\s*[+]?\d+\s*", text):
        value = int(text)
    if value is None or not 1 <= value <= MAX_ROUNDS:
        raise UsageError("--repeat %s: a whole number of rounds from 1 to %d is needed "
                         "(e.g. --repeat 20)" % (text, MAX_ROUNDS))
    return value


def seconds(text):
    """``--for`` in seconds: '90', '90s', '10m', '1h30m', '1.5h'; a UsageError quoting
    the bad value."""
    body = str(text).strip().lower()
    total, pos = 0.0, 0
    while body and pos < len(body):
        m = _PART.match(body, pos)
        if not m:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not body or pos != len(body) or not math.isfinite(total) or total <= 0 \
            or total > MAX_SECONDS:
        raise UsageError("--for %s: a duration above 0 and at most a day is needed, a "
                         "number with s, m or h (e.g. --for 90s, --for 10m, --for 1h30m)"
                         % (text,))
    return total


def option(repeat=None, duration=None):
    """The plan option for ``--repeat`` / ``--for`` as given (text or None); None when
    neither was. Both at once: a UsageError."""
    if repeat is not None and duration is not None:
        raise UsageError("--repeat %s --for %s: give one of them (a number of rounds, or "
                         "a duration)" % (repeat, duration))
    if repeat is not None:
        return {"rounds": rounds(repeat)}
    if duration is not None:
        return {"seconds": seconds(duration)}
    return None


def with_probe(specs, known):
    """The chosen probes (``probes/spec.Probe``) with the ``repeat`` probe added when it
    is not among them, from ``known`` (every probe): ``--repeat`` asks for it."""
    if any(s.name == PROBE for s in specs):
        return list(specs)
    return list(specs) + [s for s in known if s.name == PROBE]


def describe(opt):
    """'20 rounds', '1 round', 'rounds for 90 s': what the plan asks, in words."""
    opt = opt or {"rounds": DEFAULT_ROUNDS}
    if "seconds" in opt:
        return "rounds for %g s" % opt["seconds"]
    return "%d round%s" % (opt["rounds"], "" if opt["rounds"] == 1 else "s")
