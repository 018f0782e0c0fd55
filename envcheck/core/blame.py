"""Which rank is the root cause when a job stops: one rule for both drivers.

As torch elastic does, the root cause is the *earliest* failure, and ranks stuck after a
peer failed are consequences. What "stuck after a peer" means differs by kind:

- **hang**: a rank waiting inside ``torch.distributed`` (a collective, a barrier, the
  store) is waiting for a peer; a rank stuck anywhere else (a sleep, a loop, I/O, a
  deadlock in user code) is the cause. Among equals, the one whose deadline came first.
  The local supervisor tells "waiting" from the Python stack it collected; launcher mode
  from the watchdog's own look at its main thread (``in_collective`` in a ``hang``
  record).
- **crash**: a rank whose final barrier failed, or that the launcher tore down (it left a
  SIGTERM stack dump), only reacted to a peer's death; among the others the one that
  stopped first.
"""

import collections
import os
import re

Suspect = collections.namedtuple("Suspect", "rank in_collective deadline")
Casualty = collections.namedtuple("Casualty", "rank consequence when")

_DIST_FRAME = os.sep + os.path.join("torch", "distributed") + os.sep
_THREAD_HEADER = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+", re.M)


def main_thread_stack(dump):
    """The main thread's part of a faulthandler dump of all threads.

    faulthandler lists threads newest first, so the main thread is the last block.
    """
    starts = [m.start() for m in _THREAD_HEADER.finditer(dump or "")]
    return dump[starts[-1]:] if starts else (dump or "")


def waiting_in_distributed(dump):
    """Is the main thread of this stack dump inside torch.distributed?"""
    return _DIST_FRAME in main_thread_stack(dump).replace("/", os.sep)


def hang_root(suspects):
    """The rank to blame for a hang, from ``Suspect(rank, in_collective, deadline)``."""
    return min(suspects, key=lambda s: (bool(s.in_collective), s.deadline, s.rank)).rank


def crash_root(casualties):
    """The rank to blame for a crash, from ``Casualty(rank, consequence, when)``."""
    return min(casualties, key=lambda c: (bool(c.consequence), c.when, c.rank)).rank
