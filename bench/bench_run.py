"""How much does envcheck cost over the job it tests? Figures, measured in one run.

Times (median of --repeat runs each, wall clock):
- import torch alone, in a fresh interpreter;
- the bare job: 2 ranks as 2 subprocesses that import torch, init a gloo group, run
  one barrier and exit — the least any real multi-process check can cost;
- ``envcheck run`` with the probes of the first issue (launch, collectives), and the
  whole default suite (every built-in probe);
- ``envcheck --help`` and ``envcheck probes``.

Prints each figure and its ratio to the bare job. Targets: launch+collectives at most
1.5x the bare job; ``--help`` under 0.5 s.

    python bench/bench_run.py [--repeat 5]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

BARE_RANK = r"""
import datetime, os, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
dist.barrier()
os._exit(0)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bare_job(nproc=2):
    port = str(free_port())
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   WORLD_SIZE=str(nproc))
        procs.append(subprocess.Popen([sys.executable, "-c", BARE_RANK], env=env))
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit("bare job failed: exit codes %s" % codes)


def command(*args, expect=(0,)):
    def run():
        proc = subprocess.run([sys.executable, "-m", "envcheck", *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        if proc.returncode not in expect:
            raise SystemExit("envcheck %s exited %d:\n%s%s" % (" ".join(args),
                             proc.returncode, proc.stdout, proc.stderr))
    return run


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), max(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    r = args.repeat
    rows = []
    bare = median_time(bare_job, r)
    cases = [
        ("import torch", lambda: subprocess.run([sys.executable, "-c", "import torch"],
                                                check=True)),
        ("bare 2-rank gloo job (baseline)", None),
        ("envcheck run -p launch -p collectives",
         command("run", "-q", "-p", "launch", "-p", "collectives")),
        # The default suite includes probes that are *expected* to find failures on some
        # torch releases (exit 1), so both exit codes are a valid measurement here.
        ("envcheck run (default suite)", command("run", "-q", expect=(0, 1))),
        ("envcheck --help", command("--help")),
        ("envcheck probes", command("probes")),
    ]
    for name, fn in cases:
        rows.append((name, bare if fn is None else median_time(fn, r)))
    print("median of %d runs, %d cores, Python %s" % (r, os.cpu_count(),
                                                     sys.version.split()[0]))
    print("%-42s %8s %8s %8s %8s" % ("", "median", "min", "max", "x bare"))
    for name, (med, lo, hi) in rows:
        print("%-42s %7.2fs %7.2fs %7.2fs %7.2fx" % (name, med, lo, hi, med / bare[0]))
    figures = dict((name, med) for name, (med, _, _) in rows)
    suite = dict(rows)["envcheck run -p launch -p collectives"]
    ratio = suite[0] / bare[0]
    print()
    # The bare job alone varies by a third between runs on 2 busy cores; the ratio of
    # the fastest runs is the steadier figure.
    print("target: launch+collectives <= 1.5x bare: %.2fx of medians, %.2fx of minimums %s"
          % (ratio, suite[1] / bare[1], "met" if ratio <= 1.5 else "MISSED"))
    print("target: --help < 0.5 s: %.2f s %s" % (figures["envcheck --help"],
                                                  "met" if figures["envcheck --help"] < 0.5
                                                  else "MISSED"))


if __name__ == "__main__":
    main()
