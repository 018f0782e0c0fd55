"""Outcomes (what happened), verdicts (outcome against the matrix) and exit codes.

An outcome is a small closed set; whether it was *expected* is a separate step applied
afterwards by the matrix (like pytest's xfail), so probes never need to know the matrix.
"""

import enum


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    HANG = "hang"
    CRASH = "crash"
    SKIPPED = "skipped"

    @property
    def is_bad(self):
        return self in (Outcome.FAILED, Outcome.HANG, Outcome.CRASH)


# Merging ranks: the worst outcome of any rank is the check's outcome. A check skipped
# on some ranks and passed on the others passed.
SEVERITY = {Outcome.SKIPPED: 0, Outcome.PASSED: 1, Outcome.FAILED: 2, Outcome.HANG: 3,
            Outcome.CRASH: 4}

def worst(outcomes):
    outcomes = [Outcome(o) for o in outcomes]
    return max(outcomes, key=SEVERITY.__getitem__) if outcomes else Outcome.SKIPPED


class Verdict(str, enum.Enum):
    """An outcome judged against the matrix (see shared/DESIGN.md's verdict table)."""

    OK = "ok"  # passed, and passing was expected
    NEW = "new"  # passed, and the matrix has no expectation for it
    KNOWN = "known"  # failed/hung/crashed as the matrix expects: known issue + advice
    FIXED = "fixed"  # the matrix expects a failure, but it passed: stale matrix?
    UNEXPECTED = "unexpected"  # expected to pass (or to fail differently), but did not
    FAILURE = "failure"  # failed/hung/crashed and the matrix has no expectation
    # failed as the matrix expects of this torch on this Python (or NumPy): a combination
    # torch does not support. It fails the run, --strict or not: unlike a known issue,
    # which user code can work around, the fix is the environment (another Python, or
    # numpy<2), and envcheck's question is whether this environment works.
    UNSUPPORTED = "unsupported"

    @property
    def is_bad(self):
        return self in (Verdict.UNEXPECTED, Verdict.FAILURE, Verdict.UNSUPPORTED)


class ExitCode(enum.IntEnum):
    """What ``envcheck`` itself exits with."""

    OK = 0
    FAILED = 1
    USAGE = 2
    CANNOT_JUDGE = 3  # envcheck check: nothing fails, but the matrix cannot judge it all
    HANGUP = 129  # SIGHUP: the terminal was closed
    INTERRUPTED = 130  # SIGINT, as shells report it
    TERMINATED = 143  # SIGTERM


class RankExit(enum.IntEnum):
    """What a rank exits with; the drivers read these as well as its records."""

    OK = 0
    USAGE = 2  # launcher mode: bad arguments or launcher environment
    SETUP_FAILED = 3  # init_process_group failed; the reason is in the records
    TEARDOWN_FAILED = 4  # the final barrier failed: a peer died after its last probe
    HANG = 124  # launcher mode: the rank's watcher saw no progress (as timeout(1))


def exit_code(checks, interrupted=None, strict=False):
    """0 when nothing unexpected, 1 otherwise; 130/143/129 when interrupted.

    A judged check counts by its verdict (known issues pass unless ``strict``); a check
    no matrix judged counts by its outcome.
    """
    if interrupted == "SIGINT":
        return ExitCode.INTERRUPTED
    if interrupted == "SIGTERM":
        return ExitCode.TERMINATED
    if interrupted == "SIGHUP":
        return ExitCode.HANGUP
    for c in checks:
        if c.verdict is not None:
            if Verdict(c.verdict).is_bad or (strict and c.verdict == Verdict.KNOWN):
                return ExitCode.FAILED
        elif Outcome(c.outcome).is_bad:
            return ExitCode.FAILED
    return ExitCode.OK
