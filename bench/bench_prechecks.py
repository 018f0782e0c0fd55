"""What the rendezvous pre-checks add to a 2-host run (issue 23: at most 0.3 s).

Two hosts of the test cluster (tests/cluster), one torchrun agent per host, 2 ranks
each, c10d rendezvous, gloo, ``-p launch``. From every rank's records:

- ``checks``: the four pre-checks' own seconds, summed per rank (resolving MASTER_ADDR
  and the host's name, the TCP connects, reading the interfaces);
- ``before init``: from ``setup_start`` to ``init_process_group``: the checks plus the
  agreement through the store, which waits for the slowest rank to arrive, as
  init_process_group would have waited for it anyway. What they *add* is this phase on
  the rank that arrives last, which waits for nobody: the smallest over the ranks
  (``added``).

Each figure is one per run (the slowest rank's checks, the largest and the smallest
phase over the ranks); min / median / max over the runs. Needs
root (the cluster's namespaces).

    sudo .venv/bin/python bench/bench_prechecks.py [--runs 5]
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from cluster import Cluster, unavailable  # noqa: E402
from cluster.jobs import Torchrun  # noqa: E402

PRECHECKS = ("master_addr", "master_port", "host_name", "socket_interface")


def one_run(hosts, n):
    out = "/tmp/bench-pre-%d" % n
    job = Torchrun(hosts, 2, ["--out", out, "-p", "launch"], ROOT)
    bad = [(r.host.name, r.code, r.stderr[-2000:]) for r in job.wait(600) if r.code != 0]
    if bad:
        raise SystemExit("a run failed: %s" % bad)
    checks, before = [], []
    for h in hosts:
        directory = h.path(out)
        for name in sorted(os.listdir(directory)):
            if not name.startswith("records-rank"):
                continue
            with open(os.path.join(directory, name)) as f:
                recs = [json.loads(line) for line in f if line.strip()]
            checks.append(sum(r["seconds"] for r in recs if r["t"] == "check"
                              and r.get("probe") == "setup" and r["check"] in PRECHECKS))
            before.append(next(r["prechecks_s"] for r in recs if r["t"] == "setup"))
    return max(checks), max(before), min(before)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    why = unavailable()
    if why:
        raise SystemExit("cannot build the test cluster: %s" % why)
    with Cluster(2) as c:
        one_run(c.hosts, 0)  # warm-up
        runs = [one_run(c.hosts, i + 1) for i in range(args.runs)]
    print("2 hosts x 2 ranks, torchrun c10d, gloo, -p launch; %d runs, slowest rank of "
          "each" % args.runs)
    print("%-40s %9s %9s %9s" % ("", "min", "median", "max"))
    for i, name in enumerate(("pre-checks' own time (slowest rank)",
                              "setup_start to init, first rank (waits)",
                              "added: setup_start to init, last rank")):
        values = [r[i] * 1000 for r in runs]
        print("%-40s %7.1fms %7.1fms %7.1fms" % (name, min(values), statistics.median(values),
                                                 max(values)))


if __name__ == "__main__":
    main()
