"""What a zygote does for its ranks before it forks them: the worker side of the fork
server (``launch/forkserver.py``), named to it by ``module:function``.

- ``import_torch``, its init target: the one ``import torch`` every rank it forks shares
  (never initialising CUDA), timed.
- ``preload``, its preload target: on a CPU build of torch, what the probes import lazily
  (torch._dynamo for DDP, DCP: a probe's declared ``preload``, probes/suite.py).

The ranks it forks run ``rank.main`` (``envcheck run``) or ``launched.run_forked``
(under torchrun), each told by argument which zygote forked it and how long torch took.

stdlib and torch only, like the rest of ``worker/``.
"""

import time

# What the fork server is told to run first, and before a fork.
INIT = "envcheck.worker.zygote:import_torch"
PRELOAD = "envcheck.worker.zygote:preload"


def import_torch():
    """``import torch``; the seconds it took."""
    t0 = time.monotonic()
    import torch  # noqa: F401 - the one import every rank of this zygote shares

    return round(time.monotonic() - t0, 3)


def preload(probes):
    """What the probes import lazily, imported here once instead of in every rank.

    Only on a CPU build: on a CUDA build an import might initialise the driver (a device
    count, a capability check), and a CUDA driver initialised before ``fork`` is unusable
    in the child. There each rank imports them in the background itself (runtime).
    Never a probe's ``preload_in_rank`` (the frameworks): those read the rank's
    environment as they import, so each rank imports them itself."""
    import torch

    if torch.version.cuda or getattr(torch.version, "hip", None):
        return False
    from . import runtime

    runtime.preload(probes)
    return True
