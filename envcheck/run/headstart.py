"""The run's house (its directory, marker, shim) and its head start on ``import torch``.

``import torch`` is the longest thing a short run does (seconds; minutes on a cold shared
filesystem), and nothing in parsing the options or planning the run changes it, except
which interpreter runs the ranks and whether they are forked. So ``envcheck run`` starts
its first zygote (``worker/zygote.py``) the moment it starts, before it has parsed its
options (``begin``), and plans the run while torch imports. The first attempt then takes
that zygote (``HeadStart.take``) and tells it what to fork. When the options turn out to
ask for something else (``--python``, no zygote, a usage error) the head start is simply
stopped: nothing it started outlives it, as for every attempt.

It is only a guess when it is safe to guess: the ``run`` command, the interpreter
envcheck runs under (no ``--python`` anywhere in the arguments), torch importable there,
and no ``--help``. Anything else plans first and starts the zygote with the first attempt,
as before.
"""

import importlib.util
import os
import shutil
import signal
import sys
import uuid

from . import spawn
from ..launch import signals
from ..launch import contain
from ..core import limits


def make_shim(workdir):
    """A directory holding only a link to the envcheck package, for the ranks' PYTHONPATH.

    Putting envcheck's own site-packages on the path of another interpreter would shadow
    that interpreter's torch with ours; this exposes envcheck and nothing else.
    """
    shim = os.path.join(workdir, "pythonpath")
    os.makedirs(shim, exist_ok=True)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.symlink(package, os.path.join(shim, "envcheck"))
    return shim


class Workspace:
    """What every attempt of one run shares: its 0700 directory (the ranks' TMPDIR is
    inside), the ranks' PYTHONPATH shim, the marker every process of the run carries, and
    whether ranks are forked by a zygote (this process then their subreaper). ``close``
    leaves nothing of it: no marked process, no directory."""

    def __init__(self, interpreter):
        self.dir = contain.make_run_dir()
        os.makedirs(os.path.join(self.dir, "tmp"))
        self.shim = make_shim(self.dir)
        self.id = uuid.uuid4().hex
        # This process is the subreaper of everything the run starts: ranks forked by a
        # zygote become its children (run/spawn.py), and whatever a rank leaves behind
        # (a daemon in a session of its own, its environment cleared) comes to it, to be
        # killed with the attempt (core/contain.kill_descendants).
        self.reaping = contain.set_subreaper(True)
        self.forking = self.reaping and spawn.wanted() and spawn.forkable(interpreter)
        self._attempts = 0

    def attempt_dir(self):
        path = os.path.join(self.dir, "attempt%d" % self._attempts)
        self._attempts += 1
        os.makedirs(path)
        return path

    def env(self, lifeline_fd):
        """The environment every process of the run starts with (a zygote, or a rank
        before its attempt's own variables): the marker, the lifeline, TMPDIR."""
        env = dict(os.environ)
        env.update(ENVCHECK_LAUNCHER="local", PYTHONUNBUFFERED="1",
                   # Temporary files and torch's caches die with the run's directory.
                   TMPDIR=os.path.join(self.dir, "tmp"))
        # ... and the user's own, which the ranks' setup.tmpdir judges (core/limits.py)
        env[limits.USER_TMPDIR] = os.environ.get("TMPDIR", "")
        env.update({contain.MARKER: self.id, contain.LIFELINE: str(lifeline_fd),
                    contain.WORKDIR: self.dir})
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (self.shim, os.environ.get("PYTHONPATH")) if p)
        return env

    def close(self, exclude=()):
        contain.kill_marked(self.id, exclude)
        if self.reaping:
            contain.kill_descendants(exclude)
            contain.reap_orphans(set(exclude))
            contain.set_subreaper(False)
        shutil.rmtree(self.dir, ignore_errors=True)


class HeadStart:
    """A workspace and a zygote importing torch under ``interpreter``, before the run is
    planned. Taken by the run's first attempt, or closed unused."""

    def __init__(self, interpreter):
        self.interpreter = interpreter
        self.workspace = self.zygote = self.read_end = self.lifeline = None
        self.taken = False
        # SIGTERM or SIGHUP while the run is planned: unwind, so that the head start is
        # stopped and its directory removed (the default action would leave the
        # directory); not from inside an import (see launch/signals.py).
        self._previous = signals.unwind_on(signal.SIGTERM, signal.SIGHUP)
        try:
            self.workspace = Workspace(interpreter)
            if not self.workspace.forking:
                return
            self.attempt_dir = self.workspace.attempt_dir()
            self.read_end, self.lifeline = os.pipe()
            try:
                self.zygote = spawn.Zygote(interpreter, self.workspace.env(self.read_end),
                                           self.attempt_dir, (self.read_end,))
            except OSError:
                self.zygote = None
        except BaseException:  # SIGTERM halfway (see _stop): what was made goes
            self.close()
            raise

    def take(self, interpreter):
        """Its workspace and zygote for the run's first attempt, when they were made for
        this interpreter (the caller then owns them); else None."""
        if self.taken or self.zygote is None or interpreter != self.interpreter:
            return None
        self.taken = True
        return self

    def close(self):
        """Stop it, unless an attempt took it (which then cleans up after itself)."""
        with signals.held():  # all of it, or a second close would find it taken
            self._restore()
            if self.taken:
                return
            self.taken = True
            if self.zygote is not None:
                self.zygote.kill()
            for fd in (self.read_end, self.lifeline):
                if fd is not None:
                    os.close(fd)
            if self.workspace is not None:
                self.workspace.close()

    def _restore(self):
        signals.restore(self._previous)
        self._previous = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def wanted(args):
    """Is ``args`` (the command line after ``envcheck``) a run whose ranks will surely run
    under this interpreter, forked by a zygote?"""
    if not args or args[0] != "run" or not spawn.wanted():
        return False
    if any(a.startswith("--python") or a in ("--help", "-h") for a in args[1:]):
        return False
    return spawn.forkable(sys.executable) and importlib.util.find_spec("torch") is not None


def begin(args):
    """A HeadStart when ``args`` is such a run, else None. Never fails: a head start that
    cannot be made is a run planned first, as without one."""
    if not wanted(args):
        return None
    # A signal meanwhile is acted on once the caller holds the head start (see
    # launch/signals.py): raised between making the run's directory or zygote and
    # recording it, it would leave them behind.
    with signals.held():
        try:
            head = HeadStart(sys.executable)
        except Exception:  # noqa: BLE001 - e.g. no temporary directory: planning says why
            return None
        if head.zygote is None:
            head.close()
            return None
        return head
