"""What the mesh probe adds to a run, per dimension, against the same run without it.

Runs, in turn (A B A B ..., so that a machine whose speed drifts hurts both alike), from
this one invocation:
- B: ``envcheck run -q -p collectives -n N`` (the world's collectives only);
- A: the same with ``--mesh SPEC`` (the mesh probe after them);
and prints, as medians over the pairs: both walls and the pairwise ratio A/B; then each
of the mesh's checks (layout, each dimension, placement, speed): its own seconds (the
slowest rank's, from A's report) and that as a fraction of B's wall, the pair's own B.

    python bench/bench_mesh.py [--repeat 3] [--nproc 8] [--mesh pp=2,dp_shard=2,tp=2]

Figures taken on the 2-core machine shared with other work (2026-11-26, torch
2.13.0+cpu, gloo, one host; quote the ratios, not the seconds): see docs/mesh.md
"What it costs".
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def timed(args, report=None):
    """(wall seconds, {check: seconds} of the mesh probe) of one envcheck run."""
    extra = ["--json", report] if report else []
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "envcheck", "run", "-q", *args, *extra],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("envcheck run %s exited %d:\n%s" % (" ".join(args), proc.returncode,
                                                             proc.stdout[-2000:]
                                                             + proc.stderr[-2000:]))
    checks = {}
    if report:
        with open(report, encoding="utf-8") as f:
            for c in json.load(f)["checks"]:
                if c["probe"] == "mesh" and c["outcome"] != "skipped":
                    checks[c["check"]] = c.get("seconds") or 0.0
    return seconds, checks


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nproc", type=int, default=8)
    parser.add_argument("--mesh", default="pp=2,dp_shard=2,tp=2")
    args = parser.parse_args()
    base = ["-n", str(args.nproc), "-p", "collectives"]
    plain, meshed, per_check = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        for _ in range(args.repeat):
            b, _ = timed(base)
            a, checks = timed(base + ["--mesh", args.mesh], report)
            plain.append(b)
            meshed.append(a)
            for name, seconds in checks.items():
                per_check.setdefault(name, []).append(seconds / b)
    ratios = [a / b for a, b in zip(meshed, plain)]
    print("%d ranks, --mesh %s, %d pairs" % (args.nproc, args.mesh, args.repeat))
    print("B -p collectives          median %6.2f s  (min %.2f, max %.2f)"
          % (statistics.median(plain), min(plain), max(plain)))
    print("A ... --mesh              median %6.2f s  (min %.2f, max %.2f)"
          % (statistics.median(meshed), min(meshed), max(meshed)))
    print("ratio A/B                 median %6.2f    (pairwise)" % statistics.median(ratios))
    print("per check of the mesh probe, its seconds / B's wall (median over pairs):")
    for name, fractions in per_check.items():
        print("  mesh.%-20s %6.3f  (min %.3f, max %.3f)"
              % (name, statistics.median(fractions), min(fractions), max(fractions)))


if __name__ == "__main__":
    main()
