"""The one place envcheck's processes take signals: SIGINT, SIGTERM and SIGHUP.

Three ways, one module:

- **While ranks run** (the supervisor's watch loop, launcher mode's watcher): the
  signal is only noted (``Noted``), and the loop acts on it at a safe point, so that it
  never lands between starting a rank and recording it.
- **The rest of ``envcheck run``**, from its first line (``__main__``) through the head
  start, the CLI's imports and planning, to the last line of the report: below.
- **A process envcheck forks** (a rank, from a zygote or a watcher) starts from the
  defaults (``reset``), and a zygote ignores what its ranks' watchers handle
  (``ignore``).


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
from types import FrameType
from typing import Any, Dict, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Code where an exception raised by a signal handler would not simply unwind.
_IMPORT_SYSTEM = ("<frozen importlib._bootstrap", "<frozen zipimport>")
_SWALLOWING = ("__set_name__", "__del__")

noted: Optional[int] = None  # the first of them that reached this process
_said = False
_holding = 0


def note(signum: int) -> None:
    global noted
    if noted is None:
        noted = signum


def handler(signum: int, frame: Optional[FrameType]) -> None:
    note(signum)
    if not _holding and _safe(frame):
        act()


class held:
    """Inside, a signal is only noted; the caller acts on it after (``act``)."""

    def __enter__(self) -> None:
        global _holding
        _holding += 1

    def __exit__(self, *exc: Any) -> None:
        global _holding
        _holding -= 1


def _safe(frame: Optional[FrameType]) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(_IMPORT_SYSTEM) or code.co_name in _SWALLOWING:
            return False
        frame = frame.f_back
    return True


def act() -> None:
    """Unwind, when a signal was noted."""
    if noted == signal.SIGINT:
        raise KeyboardInterrupt
    if noted is not None:
        say()
        raise SystemExit(128 + noted)


def say() -> None:
    """The one line a noted signal gets (once)."""
    global _said
    if noted is not None and not _said:
        _said = True
        os.write(2, b"envcheck: interrupted\n" if noted == signal.SIGINT else
                 b"envcheck: stopped by %s\n" % signal.Signals(noted).name.encode())


def _unraisable(unraisable: Any, default: Any = sys.unraisablehook) -> None:
    if noted is not None and isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
        return  # noted: the run acts on it at its next step
    default(unraisable)


def unwind_on(*sigs: int) -> Dict[int, Any]:
    """These signals unwind from now on (``handler``); the handlers they had before."""
    return {sig: signal.signal(sig, handler) for sig in sigs}


def restore(previous: Dict[int, Any]) -> None:
    """Handlers back as ``unwind_on`` (or ``Noted``) found them."""
    for sig, old in previous.items():
        signal.signal(sig, old)


def install() -> None:
    for sig in SIGNALS:
        signal.signal(sig, handler)
    sys.unraisablehook = _unraisable


class Noted:
    """SIGINT / SIGTERM / SIGHUP while ranks run: noted (``signum``, the first one), acted
    on by the caller's loop. A context manager that restores the handlers before it
    (the supervisor, per run); ``start`` alone for a process that keeps it to its end
    (launcher mode's watcher)."""

    def __init__(self) -> None:
        # One that came before (its exception swallowed, see above): acted on at once.
        self.signum: Optional[int] = noted
        self._previous: Dict[int, Any] = {}

    def _note(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signum is None:
            self.signum = signum

    def start(self) -> "Noted":
        for sig in SIGNALS:
            self._previous[sig] = signal.signal(sig, self._note)
        return self

    def __enter__(self) -> "Noted":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        restore(self._previous)


def ignore(*sigs: int) -> None:
    """Ignore these from now on (a zygote: its ranks' watchers handle the launcher's)."""
    for sig in sigs:
        signal.signal(sig, signal.SIG_IGN)


def reset(*sigs: int) -> None:
    """These back to their defaults (a forked rank: not its zygote's handlers)."""
    for sig in sigs:
        signal.signal(sig, signal.SIG_DFL)
