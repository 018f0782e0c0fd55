"""What ``envcheck check`` and ``envcheck summary`` cost: whole-process wall times.

Each figure is the median (and min) of --repeat runs after one warm-up, of the real
console command in a fresh process, next to ``python -c pass`` (the interpreter alone)
on the same machine, so a slow or shared machine shows in the baseline too:

- ``envcheck check`` for a planned node (--driver/--gpu: no GPU lookup), the answer
  path an admin runs on every node; target: at most 0.3 s;
- ``envcheck check`` on this node (NVML or nvidia-smi lookup included);
- ``envcheck check --suggest`` (evaluates every build of every release);
- ``envcheck check 'torch>=2.0' --glibc 2.17``: a range resolved as pip would (every
  candidate's wheel tags against the node's);
- ``envcheck --help`` and ``envcheck check --help``;
- ``envcheck summary`` over 64 per-node answers.

It also asserts that ``check`` never imports torch (a torch that raises on import is put
first on PYTHONPATH).

    python bench/bench_check.py [--repeat 9]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANNED = ["check", "torch==2.4.1+cu124", "--driver", "535.104.05", "--gpu", "sm_80",
           "--python-version", "3.11"]


def envcheck_cmd():
    exe = shutil.which("envcheck")
    return [exe] if exe else [sys.executable, "-m", "envcheck"]


def timed(cmd, repeat, env=None):
    subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT)  # warm-up
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), min(walls), proc


def answers(directory, n=64):
    """n per-node answers, as 'srun envcheck check --json' would leave them."""
    base = subprocess.run(envcheck_cmd() + PLANNED + ["--format", "json"],
                          capture_output=True, text=True, cwd=ROOT).stdout
    data = json.loads(base)
    for i in range(n):
        data["host"] = "node%02d" % i
        with open(os.path.join(directory, "node%02d.json" % i), "w") as f:
            json.dump(data, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    ec = envcheck_cmd()
    poison = tempfile.mkdtemp()
    os.makedirs(os.path.join(poison, "torch"))
    with open(os.path.join(poison, "torch", "__init__.py"), "w") as f:
        f.write("raise ImportError('envcheck check imported torch')\n")
    no_torch = dict(os.environ, PYTHONPATH=os.pathsep.join([poison, ROOT]))
    with tempfile.TemporaryDirectory() as d:
        answers(d)
        rows = [("python -c pass", [sys.executable, "-c", "pass"], None),
                ("envcheck check (planned node)", ec + PLANNED, no_torch),
                ("envcheck check (this node)", ec + PLANNED[:2] + ["--python-version", "3.11"],
                 no_torch),
                ("envcheck check --suggest", ec + PLANNED + ["--suggest"], no_torch),
                ("envcheck check 'torch>=2.0' --glibc 2.17 (range resolved as pip)",
                 ec + ["check", "torch>=2.0", "--glibc", "2.17"] + PLANNED[2:], no_torch),
                ("envcheck --help", ec + ["--help"], None),
                ("envcheck check --help", ec + ["check", "--help"], None),
                ("envcheck summary (64 nodes)", ec + ["summary", d], None)]
        base = None
        print("%-32s %9s %9s %8s" % ("command", "median s", "min s", "x python"))
        for label, cmd, env in rows:
            median, best, proc = timed(cmd, args.repeat, env)
            if b"imported torch" in proc.stderr:
                sys.exit("%s imported torch" % label)
            base = base or median
            print("%-32s %9.3f %9.3f %8.1f" % (label, median, best, median / base))


if __name__ == "__main__":
    main()
