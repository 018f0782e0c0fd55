"""What one probe adds to a 2-host run, on the test cluster (issue 23's 0.3 s budget).

Two hosts of the test cluster (tests/cluster), one torchrun agent each, 2 ranks per host,
c10d rendezvous, gloo, launcher mode. Paired runs, A then B, each the wall clock from
starting both agents to the last agent's exit:

- A: ``-p launch -p PROBE``;
- B: ``-p launch``.

Printed: A's and B's walls, A - B pair by pair (the noise of two whole jobs: seconds of
torch imports on two shared cores), and the probe's own time inside A, from the ranks'
records (``probe_end``): on the rank that reached the probe last, which waited for
nobody (its cost), and on the slowest rank (with the wait for the others; the
``probe:PROBE`` phase of the report's timing). Quote the probe's own time. Needs root
(the cluster's namespaces).

    sudo .venv/bin/python bench/probe_cost.py PROBE [--pairs 5]

(bench_hosts.py and bench_bandwidth.py run it for their probe.)
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


def timed(hosts, probe, n):
    """(wall seconds, the probe's seconds per rank, its first check's detail) for one job;
    the probe's fields are None for B (``probe`` None: ``-p launch`` alone)."""
    out, report = "/tmp/bench-cost-out-%d" % n, "/tmp/bench-cost-%d.json" % n
    args = ["--out", out, "--json", report, "-p", "launch"] + (["-p", probe] if probe else [])
    t0 = time.perf_counter()
    results = Torchrun(hosts, 2, args, ROOT).wait(600)
    wall = time.perf_counter() - t0
    bad = [(r.host.name, r.code, r.stderr[-2000:]) for r in results if r.code != 0]
    if bad:
        raise SystemExit("a run failed: %s" % bad)
    if not probe:
        return wall, None, None
    with open(hosts[0].path(report), encoding="utf-8") as f:
        detail = next(c["detail"] for c in json.load(f)["checks"] if c["probe"] == probe)
    with open(hosts[0].path(out + "/records.jsonl"), encoding="utf-8") as f:
        ends = [r["seconds"] for r in map(json.loads, f)
                if r.get("t") == "probe_end" and r.get("probe") == probe]
    return wall, ends, detail


def row(name, values):
    return "%-44s min %.3f  median %.3f  max %.3f" % (
        name, min(values), statistics.median(values), max(values))


def main(probe=None, argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    if probe is None:
        p.add_argument("probe")
    p.add_argument("--pairs", type=int, default=5)
    args = p.parse_args(argv)
    probe = probe or args.probe
    why = unavailable()
    if why:
        raise SystemExit("cannot build the test cluster: %s" % why)
    a, b, last, slowest = [], [], [], []
    with Cluster(2) as c:
        timed(c.hosts, probe, 0)  # warm-up: page cache, bytecode
        timed(c.hosts, None, 1)
        for i in range(args.pairs):
            wall, ends, detail = timed(c.hosts, probe, 2 + 2 * i)
            a.append(wall)
            last.append(min(ends))
            slowest.append(max(ends))
            b.append(timed(c.hosts, None, 3 + 2 * i)[0])
            print("pair %d: A %.2f s, B %.2f s, %s %.3f s (slowest rank %.3f s): %s" % (
                i + 1, a[-1], b[-1], probe, last[-1], slowest[-1], detail), flush=True)
    print("%d pairs, 2 hosts x 2 ranks, gloo, launcher mode" % args.pairs)
    print(row("A: -p launch -p %s (s)" % probe, a))
    print(row("B: -p launch (s)", b))
    print(row("A - B, pair by pair (s)", [x - y for x, y in zip(a, b)]))
    print(row("%s, the rank that reached it last (s)" % probe, last))
    print(row("%s, the slowest rank (s)" % probe, slowest))


if __name__ == "__main__":
    main()
