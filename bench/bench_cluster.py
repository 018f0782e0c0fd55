"""envcheck across hosts next to what a user would run instead, on the test cluster.

Two hosts of the test cluster (tests/cluster: network namespaces on this machine), one
torchrun agent per host, 2 ranks each, c10d rendezvous, gloo. Paired timings, A then B,
each the wall clock from starting both agents to the last agent's exit:

- A: the full default suite in launcher mode (``-m envcheck.worker.launched``, a shared
  ``--checkpoint-dir`` so that DCP runs across the hosts), rank 0 printing the report;
- B: the hand-written DDP smoke test (``smoke_test.py``: init, all_reduce, DDP, one
  backward, barrier), launched the same way on the same hosts.

Target: A / B <= 1.0 (issue 22). The ratio is taken pair by pair and printed as min /
median / max; quote the median. Needs root (the cluster's namespaces).

    sudo .venv/bin/python bench/bench_cluster.py [--pairs 5]
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from cluster import Cluster, unavailable  # noqa: E402
from cluster.jobs import Torchrun  # noqa: E402

SMOKE = os.path.join(HERE, "smoke_test.py")


def timed(hosts, args, program=None):
    t0 = time.perf_counter()
    job = Torchrun(hosts, 2, args, ROOT, program=program)
    results = job.wait(600)
    wall = time.perf_counter() - t0
    bad = [(r.host.name, r.code, r.stderr[-2000:]) for r in results if r.code != 0]
    if bad:
        raise SystemExit("a run failed: %s" % bad)
    return wall


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    args = p.parse_args()
    why = unavailable()
    if why:
        raise SystemExit("cannot build the test cluster: %s" % why)
    suite = ["--out", "/tmp/bench-out", "--checkpoint-dir", "/mnt/shared"]
    smoke = ([sys.executable, SMOKE, "--rank", "0"], [])
    with Cluster(2) as c:
        hosts = c.hosts
        timed(hosts, suite)  # warm-up: page cache, the bytecode of both
        timed(hosts, smoke[1], program=smoke[0])
        a, b = [], []
        for _ in range(args.pairs):
            a.append(timed(hosts, suite))
            b.append(timed(hosts, smoke[1], program=smoke[0]))
    ratios = [x / y for x, y in zip(a, b)]

    def row(name, values, unit):
        print("%-44s %8.2f%s %8.2f%s %8.2f%s" % (name, min(values), unit,
                                                 statistics.median(values), unit,
                                                 max(values), unit))

    print("2 hosts x 2 ranks, torchrun c10d, gloo; %d pairs" % args.pairs)
    print("%-44s %9s %9s %9s" % ("", "min", "median", "max"))
    row("A: envcheck, full suite (launcher mode)", a, "s")
    row("B: hand-written DDP smoke test", b, "s")
    row("A / B (target <= 1.0)", ratios, "x")


if __name__ == "__main__":
    main()
