"""What the slow-host check (bandwidth.per_host) adds to a 2-host run, on the test cluster.

Two hosts of the test cluster (tests/cluster), one torchrun agent per host, 2 ranks each,
c10d rendezvous, gloo, launcher mode. Paired runs, A then B, each the wall clock from
starting both agents to the last agent's exit:

- A: ``-p launch -p bandwidth``;
- B: ``-p launch``.

Printed: A - B pair by pair (what the check adds to the whole job, blurred by torchrun's
start-up: seconds of noise on a loaded machine), and the probe's own time from A's
records (``probe_end``): on the rank that reached it last, which waited for nobody (the
cost), and on the slowest rank (which includes waiting for the others to arrive).
Target (issue 23): at most 0.3 s added to a 2-host run. Quote medians. Needs root (the
cluster's namespaces).

    sudo .venv/bin/python bench/bench_bandwidth.py [--pairs 5]
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
    report = "/tmp/bench-bw-%d.json" % n
    args = ["--out", "/tmp/bench-bw-out-%d" % n, "--json", report]
    for p in probes:
        args += ["-p", p]
    t0 = time.perf_counter()
    results = Torchrun(hosts, 2, args, ROOT).wait(600)
    wall = time.perf_counter() - t0
    bad = [(r.host.name, r.code, r.stderr[-2000:]) for r in results if r.code != 0]
    if bad:
        raise SystemExit("a run failed: %s" % bad)
    with open(hosts[0].path(report), encoding="utf-8") as f:
        checks = {c["id"]: c for c in json.load(f)["checks"]}
    check = checks.get("bandwidth.per_host")
    if not check:
        return wall, None
    ends = []
    with open(hosts[0].path("/tmp/bench-bw-out-%d/records.jsonl" % n), encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("t") == "probe_end" and rec.get("probe") == "bandwidth":
                ends.append(rec["seconds"])
    return wall, (min(ends), max(ends), check["detail"])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    args = p.parse_args()
    why = unavailable()
    if why:
        raise SystemExit("cannot build the test cluster: %s" % why)
    a, b, cost, slowest = [], [], [], []
    with Cluster(2) as c:
        timed(c.hosts, ["launch", "bandwidth"], 0)  # warm-up: page cache, bytecode
        timed(c.hosts, ["launch"], 1)
        for i in range(args.pairs):
            wall, (last, first, detail) = timed(c.hosts, ["launch", "bandwidth"], 2 + 2 * i)
            a.append(wall)
            cost.append(last)
            slowest.append(first)
            b.append(timed(c.hosts, ["launch"], 3 + 2 * i)[0])
            print("pair %d: A %.2f s, B %.2f s, probe %.3f s (slowest rank %.3f s): %s" % (
                i + 1, a[-1], b[-1], last, first, detail), flush=True)
    diffs = [x - y for x, y in zip(a, b)]

    def row(name, values, unit="s"):
        print("%-46s %8.3f%s %8.3f%s %8.3f%s" % (name, min(values), unit,
                                                 statistics.median(values), unit,
                                                 max(values), unit))

    print("2 hosts x 2 ranks, torchrun c10d, gloo; %d pairs" % args.pairs)
    print("%-46s %9s %9s %9s" % ("", "min", "median", "max"))
    row("A: -p launch -p bandwidth", a)
    row("B: -p launch", b)
    row("A - B (target <= 0.3 s)", diffs)
    row("bandwidth probe, the last rank to reach it", cost)
    row("bandwidth probe, the slowest rank", slowest)


if __name__ == "__main__":
    main()
