"""The renovated house (issue #33) against the code before it, in one paired run.

A is this checkout; B is another checkout of envcheck (``--base DIR``, e.g. a git
worktree of 38aebdc: ``git worktree add --detach /tmp/base 38aebdc``), both run by this
interpreter, each from its own directory on its own PYTHONPATH. Paired timings (A, B,
A, B, ... after one warm-up of each; wall clock of the whole process; the ratio taken
pair by pair, so that a machine that slows down during the run moves both sides alike):

- ``envcheck run`` (the whole default suite), 2 ranks — target: A/B <= 1.0 (no slower);
- the same, 8 ranks — target <= 1.0;
- ``envcheck run -p launch -p collectives`` — target <= 1.0;
- launcher mode across 2 hosts of the test cluster (network namespaces: root), 2 ranks
  each, the full suite — target <= 1.0 (``--only cluster``);

and, read from the JSON report of a run whose first probe hangs
(``probes_hang.py``), the seconds from the hang's deadline to the next probe running on
fresh ranks, for A and for B — target for A: <= 0.5 s.

A run that exits 1 counts (a known issue on some releases); a ratio above its target is
printed MISSED, never hidden. On a shared machine quote the ratios, not the seconds.

    python bench/bench_house.py --base /tmp/base [--pairs 5] [--only suite,suite8,launch,hang,cluster]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
HANG_PROBES = os.path.join(HERE, "probes_hang.py")


def _env(root):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env.pop("SLURM_PROCID", None)
    return env


def timed(root, args, ok=(0, 1)):
    """Wall seconds of ``python -m envcheck ARGS`` run from ``root``."""
    t0 = time.perf_counter()
    proc = subprocess.run([PY, "-m", "envcheck", *args], cwd=root, env=_env(root),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in ok:
        raise SystemExit("%s: envcheck %s exited %d:\n%s%s" % (
            root, " ".join(args), proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    return wall


def row(name, values, unit):
    print("  %-40s %8.2f%s %8.2f%s %8.2f%s" % (name, min(values), unit,
                                              statistics.median(values), unit,
                                              max(values), unit))


def paired(name, run_a, run_b, pairs, target):
    run_a()  # warm-up: page cache, bytecode
    run_b()
    a, b = [], []
    for _ in range(pairs):
        a.append(run_a())
        b.append(run_b())
    ratios = [x / y for x, y in zip(a, b)]
    med = statistics.median(ratios)
    print("%s  (%d pairs)" % (name, pairs))
    row("A: this checkout", a, "s")
    row("B: the base", b, "s")
    row("A / B", ratios, "x")
    print("  %-40s %s" % ("target <= %.2fx" % target, "met" if med <= target else "MISSED"))
    return med


def hang_gap(root, timeout=10.0):
    """Seconds from the hang's deadline to the next probe running on every fresh rank."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        timed(root, ["run", "-q", "--probe-path", HANG_PROBES, "-p", "hang", "-p", "after",
                     "--timeout", str(timeout), "--json", report], ok=(1,))
        with open(report, encoding="utf-8") as f:
            attempts = json.load(f)["attempts"]
    deadline = attempts[0]["abort"]["deadline"]
    nxt = attempts[1]["timing"]
    return max(nxt["started"] + p["start_s"] for r in nxt["ranks"].values()
               for p in r if p["phase"] == "probe:after") - deadline


def cluster(base, pairs):
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from cluster import Cluster, unavailable
    from cluster.jobs import Torchrun

    why = unavailable()
    if why:
        raise SystemExit("cannot build the test cluster: %s" % why)
    args = ["--out", "/tmp/bench-house-out", "--checkpoint-dir", "/mnt/shared"]

    def job(root):
        def run():
            t0 = time.perf_counter()
            results = Torchrun(hosts, 2, args, root).wait(600)
            wall = time.perf_counter() - t0
            bad = [(r.host.name, r.code, r.stderr[-2000:]) for r in results
                   if r.code not in (0, 1)]
            if bad:
                raise SystemExit("%s: a run failed: %s" % (root, bad))
            return wall
        return run

    with Cluster(2) as c:
        hosts = c.hosts
        paired("launcher mode, 2 hosts x 2 ranks, full suite", job(ROOT), job(base), pairs,
               1.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, metavar="DIR",
                   help="a checkout of envcheck to compare with (B)")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--only", default="suite,suite8,launch,hang",
                   help="comma-separated: suite, suite8, launch, hang, cluster")
    args = p.parse_args()
    base = os.path.abspath(args.base)
    if not os.path.isfile(os.path.join(base, "envcheck", "__init__.py")):
        raise SystemExit("--base %s: not a checkout of envcheck" % base)
    only = set(args.only.split(","))
    print("%s UTC, %d cores (load %.1f); A %s, B %s; min / median / max" % (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.cpu_count(), os.getloadavg()[0],
        ROOT, base))
    if "suite" in only:
        paired("envcheck run, the default suite, 2 ranks", lambda: timed(ROOT, ["run", "-q"]),
               lambda: timed(base, ["run", "-q"]), args.pairs, 1.0)
    if "suite8" in only:
        paired("envcheck run, the default suite, 8 ranks",
               lambda: timed(ROOT, ["run", "-q", "--nproc", "8"]),
               lambda: timed(base, ["run", "-q", "--nproc", "8"]), args.pairs, 1.0)
    if "launch" in only:
        paired("envcheck run -p launch -p collectives",
               lambda: timed(ROOT, ["run", "-q", "-p", "launch", "-p", "collectives"]),
               lambda: timed(base, ["run", "-q", "-p", "launch", "-p", "collectives"]),
               args.pairs, 1.0)
    if "hang" in only:
        a = [hang_gap(ROOT) for _ in range(args.pairs)]
        b = [hang_gap(base) for _ in range(args.pairs)]
        print("hang deadline -> next probe running on fresh ranks  (%d runs each)"
              % args.pairs)
        row("A: this checkout", a, "s")
        row("B: the base", b, "s")
        print("  %-40s %s" % ("target for A <= 0.50s",
                              "met" if statistics.median(a) <= 0.5 else "MISSED"))
    if "cluster" in only:
        cluster(base, args.pairs)


if __name__ == "__main__":
    main()
