"""Pay ``import torch`` once per attempt, not once per rank: import it, fork the ranks, exit.

``python -m envcheck.worker.zygote``, started by ``envcheck run`` (see ``run/spawn.py``)
under the ranks' interpreter (``--python``) with what every rank of the run shares in its
environment: the run's marker, its lifeline, its TMPDIR. It imports torch (never
initialising CUDA), then takes its orders on stdin, one JSON object per line:

- ``{"preload": [probe entries]}``: on a CPU build of torch, import now what those probes
  import lazily (torch._dynamo for DDP, DCP: a probe module's ``PRELOAD``);
- ``{"go": spec}``: preload the spec's probes (if not done), then fork one process per
  rank and exit. ``spec``: ``nproc``, ``target`` (what each fork runs, ``module:function``:
  ``envcheck.worker.rank:main``), ``argv`` (its arguments),
  ``probes``, ``stdout`` / ``stderr`` (paths with ``%d`` for the rank) and ``env`` (the
  attempt's own variables: its rendezvous port and world size);
- end of file: exit without forking (the spare or head start was not needed, or the
  supervisor is gone).

So the supervisor can start it before it knows the attempt: the run's first zygote starts
before ``envcheck run`` has even parsed its options (``run/headstart.py``), the spare for
the attempt after a hang while the hang's deadline approaches. It writes ``ready`` once
torch is imported, and one line per forked rank, ``RANK PID``. Any failure before the
forks (torch does not import) exits 1 with the traceback on stderr: the supervisor then
starts the ranks the usual way, one interpreter each, and reports what they meet. It dies
with the supervisor (``PR_SET_PDEATHSIG``): nothing else would stop an import of torch.

A forked rank is a rank like any other: its own session and process group (the
supervisor kills it with its group), stdout and stderr to its own files, stdin from
/dev/null, ``RANK`` / ``LOCAL_RANK`` in its environment, and from there the life of
``python -m envcheck.worker.rank`` (faulthandler for stacks on SIGUSR1, the lifeline thread,
records): all of it set up after the fork, in the rank itself.

stdlib and torch only, like the rest of ``worker/``.
"""

import json
import os
import random
import signal
import sys
import time

from ..launch import contain, forked, procs



def _preload(probes):
    """What the probes import lazily, imported here once instead of in every rank.

    Only on a CPU build: on a CUDA build an import might initialise the driver (a device
    count, a capability check), and a CUDA driver initialised before ``fork`` is unusable
    in the child. There each rank imports them in the background itself (runtime).
    Never a probe's ``PRELOAD_IN_RANK`` (the frameworks): those read the rank's
    environment as they import, so each rank imports them itself."""
    import torch

    if torch.version.cuda or getattr(torch.version, "hip", None):
        return False
    from . import runtime

    runtime.preload(probes)
    return True


def _child(rank, spec):
    """In the forked process: become rank ``rank`` and run it; never returns."""
    def become():
        os.setsid()  # its own session and process group: the supervisor kills the group
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, spec["stdout"] % rank), (2, spec["stderr"] % rank)):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)  # fd 1 was the pipe to the supervisor: no longer ours
            os.close(out)
        os.environ.update(spec.get("env", {}))
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
        random.seed()  # not the zygote's sequence in every rank

        target = forked.resolve(spec["target"])
        return target(spec["argv"], forked={"zygote_pid": os.getppid(),
                                            "torch_import_s": spec["import_s"]})

    forked.run_forked(become)


def _orders():
    """The supervisor's orders on stdin, one JSON object per line, until end of file."""
    for line in sys.stdin:
        line = line.strip()
        if line:
            yield json.loads(line)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].isdigit():
        contain.die_with_parent(int(argv[0]))
    t0 = time.monotonic()
    import torch  # noqa: F401 - the one import of the attempt, timed

    import_s = round(time.monotonic() - t0, 3)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, b"ready\n")
    preloaded = False
    for order in _orders():
        if "preload" in order and not preloaded:
            _preload(order["preload"])
            preloaded = True
        if "go" in order:
            spec = dict(order["go"], import_s=import_s)
            if not preloaded:
                _preload(spec["probes"])
            for rank in range(spec["nproc"]):
                pid = procs.fork()
                if pid == 0:
                    _child(rank, spec)
                os.write(1, b"%d %d\n" % (rank, pid))
            break
    os._exit(0)  # torch's atexit hooks are the ranks' business, not the zygote's


if __name__ == "__main__":
    main()
