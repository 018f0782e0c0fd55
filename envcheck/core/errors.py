"""The one domain error: bad input or configuration, shown as one line, exit code 2."""


class UsageError(ValueError):
    """A flag, file, path or interpreter the user gave is unusable.

    The message is the whole story for the user: what was wrong, quoting the bad input,
    and what to do instead. The CLI prints it on one line and exits 2.
    """
