"""What envcheck costs next to what a user would run instead: every figure of issue 14,
each with its baseline, from one run.

Paired timings (A, B, A, B, ... after one warm-up of each, wall clock of the whole
process; the ratio is taken pair by pair, so a machine that speeds up or slows down
during the run moves both sides of a pair alike):

- ``envcheck run`` (the whole default suite) / the hand-written 2-rank DDP smoke test
  (``smoke_test.py``) — target <= 1.1x;
- the same at 8 ranks (``--nproc 8`` / ``smoke_test.py --nproc 8``) — target <= 1.0x;
- ``envcheck run -p launch -p collectives`` / a bare 2-rank job (``bare_job.py``: import,
  init, barrier) — target <= 1.2x.

Read from the JSON report of a run whose first probe hangs (``probes_hang.py``): from
the hang's deadline to the next probe running on fresh ranks — target <= 0.5 s (the
timeout itself is the baseline, not counted).

Absolute: ``envcheck check`` (target <= 0.3 s) and ``envcheck --help`` (<= 0.15 s);
the supervisor's peak memory (the ``envcheck`` process's own ru_maxrss) on a quiet run
and on a run whose ranks print 64 MiB each (bounded: the two should be alike).

    python bench/bench_run.py [--repeat 5] [--only suite,suite8,launch,hang,cli,memory]

Prints min / median / max of every figure. On a shared machine quote the ratios.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
HANG_PROBES = os.path.join(HERE, "probes_hang.py")


def envcheck(*args):
    return [PY, "-m", "envcheck", *args]


def timed(argv, ok=(0,)):
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise SystemExit("%s exited %d:\n%s%s" % (" ".join(argv), proc.returncode,
                                                 proc.stdout.decode()[-3000:],
                                                 proc.stderr.decode()[-3000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def stats(values):
    return min(values), statistics.median(values), max(values)


def fmt(triple, unit="s"):
    return "  ".join("%7.2f%s" % (v, unit) for v in triple)


def paired(name, a, b, repeat, target, ok_a=(0,)):
    """Run A and B in turn; print both and the ratio A/B (wall and CPU), pair by pair."""
    timed(a, ok_a)  # warm-up: page cache, bytecode
    timed(b)
    walls_a, walls_b, cpu_a, cpu_b = [], [], [], []
    for _ in range(repeat):
        wa, ca = timed(a, ok_a)
        wb, cb = timed(b)
        walls_a.append(wa)
        walls_b.append(wb)
        cpu_a.append(ca)
        cpu_b.append(cb)
    ratio = [x / y for x, y in zip(walls_a, walls_b)]
    cpu_ratio = [x / y for x, y in zip(cpu_a, cpu_b)]
    print("%s  (%d pairs)" % (name, repeat))
    print("  %-44s %s" % ("A: " + " ".join(os.path.basename(x) for x in a[1:]),
                         fmt(stats(walls_a))))
    print("  %-44s %s" % ("B: " + " ".join(os.path.basename(x) for x in b[1:]),
                         fmt(stats(walls_b))))
    med = stats(ratio)[1]
    print("  %-44s %s   target <= %.2fx: %s" % ("wall A/B", fmt(stats(ratio), "x"), target,
                                                 "met" if med <= target else "MISSED"))
    print("  %-44s %s" % ("CPU A/B", fmt(stats(cpu_ratio), "x")))
    return med


def hang_to_next_probe(repeat, timeout=10.0):
    """Seconds from the hang's deadline to the next probe running on every fresh rank,
    read from the report's attempt timing (the supervisor's clock, the ranks' records)."""
    gaps = []
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        for _ in range(repeat):
            timed(envcheck("run", "-q", "--probe-path", HANG_PROBES, "-p", "hang", "-p",
                           "after", "--timeout", str(timeout), "--json", report), ok=(1,))
            with open(report, encoding="utf-8") as f:
                attempts = json.load(f)["attempts"]
            deadline = attempts[0]["abort"]["deadline"]
            nxt = attempts[1]["timing"]
            starts = [nxt["started"] + p["start_s"] for r in nxt["ranks"].values()
                      for p in r if p["phase"] == "probe:after"]
            gaps.append(max(starts) - deadline)
    print("hang deadline -> next probe running on fresh ranks  (%d runs, --timeout %g)"
          % (repeat, timeout))
    med = stats(gaps)[1]
    print("  %-44s %s   target <= 0.50s: %s" % ("seconds past the deadline", fmt(stats(gaps)),
                                                 "met" if med <= 0.5 else "MISSED"))


def absolute(name, argv, repeat, target, ok=(0,)):
    timed(argv, ok)
    walls = [timed(argv, ok)[0] for _ in range(repeat)]
    med = stats(walls)[1]
    print("  %-44s %s   target <= %.2fs: %s" % (name, fmt(stats(walls)), target,
                                                 "met" if med <= target else "MISSED"))


PEAK = r"""
import resource, sys
from envcheck.cli import entry
sys.argv = ["envcheck"] + sys.argv[1:]
try:
    entry()
finally:
    sys.stderr.write("\npeak-rss-kib %d\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss(args):
    proc = subprocess.run([PY, "-c", PEAK, *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    for line in proc.stderr.splitlines():
        if line.startswith("peak-rss-kib "):
            return int(line.split()[1]) / 1024.0
    raise SystemExit("no peak figure from envcheck %s:\n%s" % (" ".join(args),
                                                               proc.stderr[-3000:]))


def memory(repeat):
    quiet = [peak_rss(["run", "-q", "-p", "launch"]) for _ in range(repeat)]
    chatty = [peak_rss(["run", "-q", "--probe-path", HANG_PROBES, "-p", "launch", "-p",
                        "chatty"]) for _ in range(repeat)]
    print("supervisor peak memory (ru_maxrss of the envcheck process)  (%d runs)" % repeat)
    print("  %-44s %s" % ("-p launch", fmt(stats(quiet), "M")))
    print("  %-44s %s" % ("-p launch -p chatty (64 MiB printed per rank)",
                          fmt(stats(chatty), "M")))
    print("  %-44s %s" % ("ratio chatty/quiet", fmt(stats([c / q for c, q in
                                                             zip(chatty, quiet)]), "x")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", default="suite,suite8,launch,hang,cli,memory",
                        help="comma-separated figures to measure")
    args = parser.parse_args()
    only = set(args.only.split(","))
    r = args.repeat
    smoke = os.path.join(HERE, "smoke_test.py")
    print("%s UTC, %d cores (load %.1f), Python %s; min / median / max"
          % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.cpu_count(),
             os.getloadavg()[0], sys.version.split()[0]))
    # The default suite finds known issues on some releases (exit 1 without anything
    # unexpected would be a regression only if the matrix said so): both codes count.
    if "suite" in only:
        paired("full default suite / hand-written DDP smoke test, 2 ranks",
               envcheck("run", "-q"), [PY, smoke], r, 1.1, ok_a=(0, 1))
    if "suite8" in only:
        paired("full default suite / the same smoke test, 8 ranks",
               envcheck("run", "-q", "--nproc", "8"), [PY, smoke, "--nproc", "8"], r, 1.0,
               ok_a=(0, 1))
    if "launch" in only:
        paired("-p launch -p collectives / bare 2-rank job (import, init, barrier)",
               envcheck("run", "-q", "-p", "launch", "-p", "collectives"),
               [PY, os.path.join(HERE, "bare_job.py")], r, 1.2)
    if "hang" in only:
        hang_to_next_probe(r)
    if "cli" in only:
        print("commands that start no rank  (%d runs)" % r)
        absolute("envcheck check torch==2.4.1+cu124", envcheck("check", "torch==2.4.1+cu124"),
                 r, 0.3, ok=(0, 1))
        absolute("envcheck --help", envcheck("--help"), r, 0.15)
    if "memory" in only:
        memory(r)


if __name__ == "__main__":
    main()
