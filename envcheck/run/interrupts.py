"""SIGINT, SIGTERM and SIGHUP in ``envcheck run`` whenever the supervisor does not watch
them itself (``supervisor.Signals``, while ranks run): from its first line (``__main__``)
through the head start, the CLI's imports and planning, to the last line of the report.

A signal unwinds the run: SIGINT as ``KeyboardInterrupt`` (the CLI says "envcheck:
interrupted" and exits 130), SIGTERM and SIGHUP as ``SystemExit(128 + N)`` with one
line; what was started is stopped on the way out. Not raised at any point, though: an
exception raised inside an import can be swallowed (a module lock's weakref callback:
Python prints "Exception ignored in ...", with a traceback, and goes on) or turned into
another (a ``RuntimeError`` from ``__set_name__``, as ``import uuid`` does). There, and
in ``__del__``, the signal is only *noted*, and the run acts on it at its next step:
``__main__`` once the head start and the CLI are imported, the supervisor before it
starts a rank (the run is then interrupted, with its partial report), ``__main__`` at
exit. So it is ``held()`` while the head start is made and stopped: an exception
between creating a directory (or a process) and recording it would leave it behind.

Only the interpreter's own start, before ``envcheck/__main__.py`` runs (``site`` and
its ``.pth`` files included), is left to Python's default.
"""

import os
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Code where an exception raised by a signal handler would not simply unwind.
_IMPORT_SYSTEM = ("<frozen importlib._bootstrap", "<frozen zipimport>")
_SWALLOWING = ("__set_name__", "__del__")

noted = None  # the first of them that reached this process
_said = False
_holding = 0


def note(signum):
    global noted
    if noted is None:
        noted = signum


def handler(signum, frame):
    note(signum)
    if not _holding and _safe(frame):
        act()


class held:
    """Inside, a signal is only noted; the caller acts on it after (``act``)."""

    def __enter__(self):
        global _holding
        _holding += 1

    def __exit__(self, *exc):
        global _holding
        _holding -= 1
        return False


def _safe(frame):
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(_IMPORT_SYSTEM) or code.co_name in _SWALLOWING:
            return False
        frame = frame.f_back
    return True


def act():
    """Unwind, when a signal was noted."""
    if noted == signal.SIGINT:
        raise KeyboardInterrupt
    if noted is not None:
        say()
        raise SystemExit(128 + noted)


def say():
    """The one line a noted signal gets (once)."""
    global _said
    if noted is not None and not _said:
        _said = True
        os.write(2, b"envcheck: interrupted\n" if noted == signal.SIGINT else
                 b"envcheck: stopped by %s\n" % signal.Signals(noted).name.encode())


def _unraisable(unraisable, default=sys.unraisablehook):
    if noted is not None and isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
        return  # noted: the run acts on it at its next step
    default(unraisable)


def install():
    for sig in SIGNALS:
        signal.signal(sig, handler)
    sys.unraisablehook = _unraisable
