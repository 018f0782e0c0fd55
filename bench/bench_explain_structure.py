"""What reading a log's structure first (issue #34) costs `envcheck explain` on a big
log, against the code before it, in the same run.

    python bench/bench_explain_structure.py --before TREE   # TREE: a checkout of the old code
    python bench/bench_explain_structure.py --before TREE --sizes 2048 --runs 3

The log is bench_explain.py's (4 ranks' progress lines, a tqdm bar, NCCL INFO lines, a
DataLoader warning every few hundred lines: that word is now a scan word), ending in the
real 4-rank torchrun failure made here (tests/data/explain/torchrun-4rank-user-error.log:
a user error on rank 2, tracebacks of the other ranks, torchrun's summary), so the new
code reads tracebacks back at the end of a 2 GB file. Each version runs as
`envcheck explain --format json LOG` in a fresh process (bench_explain.run_once, in
that version's tree), alternating runs, so that the machine's load (2
cores shared) falls on both alike: the figure to read is the ratio. Results:
bench/explain.md.
"""

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_explain  # noqa: E402

FAILURE = os.path.join(ROOT, "tests", "data", "explain", "torchrun-4rank-user-error.log")


def run(tree, path):
    """bench_explain.run_once with that tree as the working directory (python -c puts
    it first on sys.path, so its envcheck is the one imported)."""
    bench_explain.ROOT = tree
    return bench_explain.run_once(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a tree holding the code before")
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2048], help="MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    print("| log | version | wall s, median (min–max) | CPU s, median | peak RSS MiB | "
          "first finding |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        path = os.path.join(args.dir, "envcheck-explain-structure-%dm.log" % size)
        bench_explain.make_log(path, size)
        with open(FAILURE, "rb") as src, open(path, "ab") as out:
            out.write(src.read())
        results = {"before": [], "now": []}
        try:
            for _ in range(args.runs):
                results["before"].append(run(os.path.abspath(args.before), path))
                results["now"].append(run(ROOT, path))
        finally:
            os.unlink(path)
        med = {}
        for name, runs in results.items():
            walls = sorted(r[0] for r in runs)
            cpus = sorted(r[1] for r in runs)
            med[name] = cpus[len(cpus) // 2]
            print("| %d MiB | %s | %.1f (%.1f–%.1f) | %.1f | %.0f | %s |" % (
                size, name, walls[len(walls) // 2], walls[0], walls[-1], med[name],
                max(r[2] for r in runs) / 1024, (runs[0][3] or ["-"])[0]))
        print("| %d MiB | now / before (CPU) | %.2f | | | |" % (size, med["now"] / med["before"]))


if __name__ == "__main__":
    main()
