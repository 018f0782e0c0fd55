"""What the fsdp probe costs, against the default suite: the figure behind making it opt-in.

Runs, in turn (A B A B ..., so that a machine whose speed drifts hurts both alike):
- ``envcheck run -q`` (the default suite, which leaves fsdp out);
- ``envcheck run -q -p fsdp`` (the main run and its two follow-up phases, at 3 and 1
  ranks);
and prints the median wall time of each and the median of the pairwise ratios.

    python bench/bench_fsdp.py [--repeat 3] [--nproc 2]

Figures taken on a 2-core machine shared with other work (2026-11-23, torch 2.13.0+cpu,
2 ranks, 3 pairs, whole-process): default suite median 21.9 s wall / 10.4 s CPU,
``-p fsdp`` median 56.2 s wall / 29.0 s CPU, pairwise ratio fsdp/default 2.54 wall,
2.78 CPU (the machine was shared: quote the ratio, not the seconds). The default suite's
goal (issue 14) is at most 1.1x a hand-written smoke test; adding fsdp would make the
suite about 3.5 times as long, hence opt-in (docs/fsdp.md).
"""

import argparse
import statistics
import subprocess
import sys
import time


def timed(args):
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "envcheck", "run", "-q", *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit("envcheck run %s exited %d:\n%s" % (" ".join(args), proc.returncode,
                                                             proc.stderr[-2000:]))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    n = ["--nproc", str(args.nproc)]
    default, fsdp = [], []
    for _ in range(args.repeat):
        default.append(timed(n))
        fsdp.append(timed(n + ["-p", "fsdp"]))
    ratios = [f / d for f, d in zip(fsdp, default)]
    print("default suite       median %6.1f s  (min %.1f, max %.1f)"
          % (statistics.median(default), min(default), max(default)))
    print("-p fsdp             median %6.1f s  (min %.1f, max %.1f)"
          % (statistics.median(fsdp), min(fsdp), max(fsdp)))
    print("ratio fsdp/default  median %6.2f    (pairwise, %d pairs)"
          % (statistics.median(ratios), len(ratios)))


if __name__ == "__main__":
    main()
