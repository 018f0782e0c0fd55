"""Probes for bench_run.py: one that hangs on every rank, one that runs after it (on the
fresh ranks of the next attempt), and one that prints a lot (the supervisor's memory
must not grow with what ranks print)."""

CHECKS = {"hang": ("wait",), "after": ("ran",), "chatty": ("printed",)}


def probe_hang(ctx):
    import time

    with ctx.check("wait"):
        time.sleep(3600)


def probe_after(ctx):
    with ctx.check("ran") as c:
        c.detail = "ran on fresh ranks"


def probe_chatty(ctx):
    import sys

    with ctx.check("printed") as c:
        line = "x" * 1023 + "\n"
        for _ in range(64 * 1024):  # 64 MiB on stdout and on stderr, per rank
            sys.stdout.write(line)
            sys.stderr.write(line)
        c.detail = "64 MiB on stdout and stderr"
