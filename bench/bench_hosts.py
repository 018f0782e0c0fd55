"""What the hosts probe (skew, clock, /dev/shm, memlock, open files) adds to a 2-host run.

Two hosts of the test cluster (tests/cluster), one torchrun agent each, 2 ranks per host,
c10d rendezvous, gloo, launcher mode. Paired runs, A then B, each the wall clock from
starting both agents to the last agent's exit:

- A: ``-p launch -p hosts``;
- B: ``-p launch``.

Printed: A's and B's walls, the difference A - B pair by pair (min / median / max), and
the probe's own time inside A (the ``probe:hosts`` phase of the report's timing, the
slowest rank). Target: 0.3 s (issue 23). The wall difference carries the noise of two
whole jobs (seconds of torch imports on two shared cores); the probe's own time is the
figure to quote. Needs root (the cluster's namespaces).

    sudo .venv/bin/python bench/bench_hosts.py [--pairs 5]
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from cluster import Cluster, unavailable  # noqa: E402
from cluster.jobs import Torchrun  # noqa: E402


def timed(hosts, probes, n):
    report = "/tmp/bench-hosts-%d.json" % n
    args = ["--out", "/tmp/bench-hosts-out-%d" % n, "--json", report]
    for p in probes:
        args += ["-p", p]
    t0 = time.perf_counter()
    results = Torchrun(hosts, 2, args, ROOT).wait(600)
    wall = time.perf_counter() - t0
    bad = [(r.host.name, r.code, r.stderr[-2000:]) for r in results if r.code != 0]
    if bad:
        raise SystemExit("a run failed: %s" % bad)
    with open(hosts[0].path(report), encoding="utf-8") as f:
        data = json.load(f)
    probe = max((ph["seconds"] for a in data["attempts"]
                 for phases in ((a.get("timing") or {}).get("ranks") or {}).values()
                 for ph in phases if ph["phase"] == "probe:hosts"), default=None)
    return wall, probe


def row(name, values):
    return "%-26s min %.3f  median %.3f  max %.3f" % (
        name, min(values), statistics.median(values), max(values))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    args = p.parse_args()
    why = unavailable()
    if why:
        raise SystemExit("cannot build the test cluster: %s" % why)
    with Cluster(2) as c:
        hosts = c.hosts
        timed(hosts, ["launch", "hosts"], 0)  # warm-up: page cache, bytecode
        timed(hosts, ["launch"], 1)
        a, b, probe = [], [], []
        for i in range(args.pairs):
            wall, own = timed(hosts, ["launch", "hosts"], 2 + 2 * i)
            a.append(wall)
            probe.append(own)
            b.append(timed(hosts, ["launch"], 3 + 2 * i)[0])
    print("%d pairs, 2 hosts x 2 ranks, gloo, launcher mode" % args.pairs)
    print(row("A: -p launch -p hosts (s)", a))
    print(row("B: -p launch (s)", b))
    print(row("A - B, pair by pair (s)", [x - y for x, y in zip(a, b)]))
    print(row("probe:hosts in A (s)", probe))


if __name__ == "__main__":
    main()
