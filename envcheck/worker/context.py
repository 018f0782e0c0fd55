"""What a probe gets: the rank's identity, the process group, and ``ctx.check(...)``.

A probe is a function ``probe_NAME(ctx)``. Each thing it proves is a *check*::

    def probe_example(ctx):
        import torch
        import torch.distributed as dist

        with ctx.check("all_reduce") as c:
            t = torch.ones(1, device=ctx.device)
            dist.all_reduce(t)
            if t.item() != ctx.world_size:
                c.fail("expected %d, got %s" % (ctx.world_size, t.item()),
                       advice="...")
            c.detail = "sum over %d ranks" % ctx.world_size

Whatever happens inside ``with ctx.check(...)`` becomes that check's outcome: an
exception is ``failed`` (type, message, traceback, advice), ``c.skip(reason)`` is
``skipped``. "Exception" means any ``BaseException`` but the two that stop a process
(``STOPS``): torch derives some errors from ``BaseException`` itself (DCP's
``CheckpointException``, every release from 2.0 to 2.13 at least), and catching only
``Exception`` let them kill the rank and take the probe's later checks with it. Every rank runs the same checks; the supervisor merges them, so a check
passes only when it passed on every rank. Hangs and crashes inside a check are seen by
the supervisor, not here.
"""

import os
import shutil
import tempfile
import time
import traceback

from .hazards import advice_for, out_of_space


# What stops a rank rather than fails a check: Ctrl-C / SIGTERM (the drivers turn those
# into KeyboardInterrupt / SystemExit) and sys.exit(). Everything else a probe raises,
# BaseException subclasses included, is a failed check.
STOPS = (KeyboardInterrupt, SystemExit)


def is_stop(exc):
    return isinstance(exc, STOPS)


class CheckSkipped(Exception):
    pass


class CheckFailed(Exception):
    def __init__(self, message, advice=None):
        super().__init__(message)
        self.advice = advice


class CheckHung(Exception):
    """A probe that watched its own collective past a deadline (the mesh probe's
    groups): the check is a ``hang``, with this rank's stacks, while the probe goes on."""

    def __init__(self, message, stack=None, advice=None):
        super().__init__(message)
        self.stack = stack
        self.advice = advice


class UndeclaredCheck(Exception):
    pass


class Check:
    """The handle a probe fills in while a check runs."""

    def __init__(self, name):
        self.name = name
        self.detail = ""
        self.advice = None
        self.data = {}

    def skip(self, reason):
        raise CheckSkipped(reason)

    def fail(self, message, advice=None):
        raise CheckFailed(message, advice)

    def hang(self, message, stack=None, advice=None):
        """This check hung (a collective that never completed), seen by the probe
        itself: ``stack`` is this rank's faulthandler dump, as the supervisor keeps."""
        raise CheckHung(message, stack, advice)


class _CheckScope:
    def __init__(self, ctx, name):
        self._ctx = ctx
        self._check = Check(name)

    def __enter__(self):
        self._start = time.monotonic()
        self._ctx._records.write("check_start", probe=self._ctx.probe, check=self._check.name)
        return self._check

    def __exit__(self, exc_type, exc, tb):
        c = self._check
        fields = dict(
            probe=self._ctx.probe,
            check=c.name,
            seconds=round(time.monotonic() - self._start, 6),
            detail=c.detail,
            data=c.data,
            advice=c.advice,
        )
        if exc is None:
            fields["outcome"] = "passed"
        elif isinstance(exc, CheckSkipped):
            fields["outcome"] = "skipped"
            fields["detail"] = str(exc)
        elif isinstance(exc, CheckHung):
            fields.update(outcome="hang", detail=str(exc), stack=exc.stack,
                          advice=exc.advice or c.advice)
        elif not is_stop(exc):
            fields["outcome"] = "failed"
            message = str(exc)
            fields["error"] = {
                "type": "CheckFailed" if isinstance(exc, CheckFailed) else _qualname(exc_type),
                "message": message,
                "traceback": "".join(traceback.format_exception(exc_type, exc, tb)),
            }
            if isinstance(exc, CheckFailed):
                fields["advice"] = exc.advice or c.advice
            else:
                fields["advice"] = (advice_for(exc, environment_only=True) or c.advice
                                    or advice_for(exc))
            if not fields["detail"]:
                # MemoryError() and friends carry no message: their type is the story.
                fields["detail"] = _first_line(message) or fields["error"]["type"]
            full = None if isinstance(exc, CheckFailed) else out_of_space(message)
            if full:  # the space's fault, whatever words torch found for it
                fields["detail"] = "out of space (%s): %s" % (full, fields["detail"])
        else:
            # KeyboardInterrupt / SystemExit: let the rank stop; the supervisor reports it.
            return False
        self._ctx._records.write("check", **fields)
        return True


def _qualname(exc_type):
    module = exc_type.__module__
    if module in ("builtins", None):
        return exc_type.__qualname__
    return "%s.%s" % (module, exc_type.__qualname__)


def _first_line(text):
    from ..core.text import first_line  # the one truncation rule: cut at a word, with "…"

    return first_line(text)


class Context:
    """Per-rank state shared by every probe of a run."""

    def __init__(self, records, rank, local_rank, world_size, local_world_size,
                 backend, device, timeout, options, host):
        self._records = records
        self.rank = rank
        self.local_rank = local_rank
        self.world_size = world_size
        self.local_world_size = local_world_size
        self.backend = backend
        self.device = device
        self.timeout = timeout
        self.options = options
        self.host = host
        self.probe = None
        self.declared = None  # the running probe's CHECKS; None: undeclared, any check
        # Set for a probe that has follow-up phases (core.plan.follow_ups): the directory
        # it hands state on in (None in launcher mode), and in a follow-up phase, the
        # phase ({"check", "saved_world_size"}).
        self.handoff = None
        self.phase = None
        self.init_seconds = None

    @property
    def records(self):
        """The rank's record writer (the drivers' business, not a probe's)."""
        return self._records

    def check(self, name):
        declared = self.declared
        if declared is not None and name not in declared:
            # The declaration is what the matrix and `envcheck probes` trust; a check
            # it does not list would be a result nobody can expect or look up.
            raise UndeclaredCheck("probe %r reports check %r, which its CHECKS does not "
                                  "declare (%s)" % (self.probe, name, ", ".join(declared)))
        return _CheckScope(self, name)

    def private_tmpdir(self, prefix="envcheck-"):
        """A 0700 temporary directory, removed when the ``with`` block ends."""
        return _PrivateTmpdir(prefix)


class _PrivateTmpdir:
    def __init__(self, prefix):
        self._prefix = prefix

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix=self._prefix)
        os.chmod(self.path, 0o700)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False
