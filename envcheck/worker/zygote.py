"""Pay ``import torch`` once per attempt, not once per rank: import it, fork the ranks, exit.

``python -m envcheck.worker.zygote SPEC.json``, started by ``envcheck run`` (see
``run/spawn.py``) under the ranks' interpreter (``--python``) with the ranks' environment:
the run's marker, its lifeline, its TMPDIR. It imports torch (never initialising CUDA),
and on a CPU build of torch also what the planned probes import lazily (torch._dynamo for
DDP, DCP: a probe module's ``PRELOAD``); then forks one process per rank and exits. The
supervisor is the ranks' subreaper: once the zygote is gone they are its children, so it
reads their exit codes and signals as it would from processes it started itself.

A forked rank is a rank like any other: its own session and process group (the
supervisor kills it with its group), stdout and stderr to its own files, stdin from
/dev/null, ``RANK`` / ``LOCAL_RANK`` in its environment, and from there the life of
``python -m envcheck.worker`` (faulthandler for stacks on SIGUSR1, the lifeline thread,
records): all of it set up after the fork, in the rank itself.

Once torch is imported it writes ``ready`` to stdout and waits for a line on stdin:
``go`` forks the ranks (the supervisor may start a zygote early, as the spare for the
attempt that follows a hang, and hold it there); end of file exits without forking (the
spare was not needed, or the supervisor is gone). Then one line per forked rank,
``RANK PID``. Any failure before the forks (torch does not import) exits 1 with the
traceback on stderr: the supervisor then starts the ranks the usual way, one interpreter
each, and reports what they meet.

stdlib and torch only, like the rest of ``worker/``.
"""

import json
import os
import random
import sys
import time
import traceback


def _preload(spec):
    """What the probes import lazily, imported here once instead of in every rank.

    Only on a CPU build: on a CUDA build an import might initialise the driver (a device
    count, a capability check), and a CUDA driver initialised before ``fork`` is unusable
    in the child. There each rank imports them in the background itself (runtime)."""
    import torch

    if torch.version.cuda or getattr(torch.version, "hip", None):
        return False
    from . import runtime

    runtime.preload(spec["probes"])
    return True


def _child(rank, spec):
    """In the forked process: become rank ``rank`` and run it; never returns."""
    code = 1
    try:
        os.setsid()  # its own session and process group: the supervisor kills the group
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd, path in ((1, spec["stdout"] % rank), (2, spec["stderr"] % rank)):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)  # fd 1 was the pipe to the supervisor: no longer ours
            os.close(out)
        os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
        random.seed()  # not the zygote's sequence in every rank

        from . import runtime
        from .__main__ import main

        runtime.FORKED = {"zygote_pid": os.getppid(), "torch_import_s": spec["import_s"]}
        main(spec["argv"])
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write("%s\n" % exc.code)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        spec = json.load(f)
    t0 = time.monotonic()
    import torch  # noqa: F401 - the one import of the attempt, timed

    spec["import_s"] = round(time.monotonic() - t0, 3)
    _preload(spec)
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(1, b"ready\n")
    if sys.stdin.readline().strip() != "go":
        os._exit(0)
    for rank in range(spec["nproc"]):
        pid = os.fork()
        if pid == 0:
            _child(rank, spec)
        os.write(1, b"%d %d\n" % (rank, pid))
    os._exit(0)  # torch's atexit hooks are the ranks' business, not the zygote's


if __name__ == "__main__":
    main()
