"""What `envcheck explain` costs on a big log: wall and CPU time, peak memory.

    python bench/bench_explain.py                 # 200 MB and 2 GB logs, 3 runs each
    python bench/bench_explain.py --sizes 2048 --runs 5 --dir /scratch
    python bench/bench_explain.py --baseline HEAD~1   # also envcheck at a git revision

The log is a training job's: 4 ranks' progress lines with torchrun's prefixes, a tqdm
bar, NCCL_DEBUG=INFO lines at start-up, a few Python warnings, and at the very end a
real failure (watchdog timeouts after P2P transport lines, texts from
tests/data/explain_corpus.toml), so the whole file must be read to find it. With
``--log info`` it is NCCL_DEBUG=INFO output instead, every line a hit: the NCCL INFO
lines of both corpora (real wordings), each under 8 ranks' NCCL prefixes in turn, then
the same failure (bench/explain-info.md). Each run is
`python -m envcheck explain --format json LOG` in a fresh process; peak memory is that
process's VmHWM (read by a wrapper, as ru_maxrss would carry over the peak of the
process that started it). With ``--baseline REV`` each size is also run with envcheck as
it was at git revision REV (``git archive`` into a temporary directory, first on the
import path), the two alternating run by run so that both see the same load. Results:
bench/explain.md.
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HEAD = (
    "W1123 15:55:37.768000 27333 torch/distributed/run.py:874] Setting OMP_NUM_THREADS "
    "environment variable for each process to be 1 in default\n"
    "node-1:1890568:1890568 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    "NCCL version 2.21.5+cuda12.4\n"
    "node-1:1890568:1890933 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
    "node-1:1890569:1890937 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n"
)
BODY = "".join(
    "[rank%d]: step %d loss=2.%04d lr=3.0e-4 grad_norm=0.98 tokens/s=123456 mem=34.5GiB\n"
    "[default%d]:Epoch 0:   6%%|██        | %d/500150 [6:28:43<94:39:17,  1.37it/s, "
    "loss=2.6, v_num=95nc]\n" % (r, i, i, r, i) for i in range(50) for r in range(4))
WARNING = ("[rank0]: /opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py:"
           "557: UserWarning: This DataLoader will create 16 worker processes in total.\n")
# https://github.com/NVIDIA/nccl/issues/1509 (tests/data/explain_corpus.toml)
TAIL = "".join(
    "[rank%d]:[E ProcessGroupNCCL.cpp:563] [Rank %d] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=42516042, NumelOut=42516042, "
    "Timeout(ms)=600000) ran for 600089 milliseconds before timing out.\n" % (r, r)
    for r in range(4))


def _info_lines():
    """The NCCL INFO lines of both corpora, after NCCL's own 'host:pid:tid [dev] '."""
    import re
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    out = []
    for name in ("explain_corpus.toml", "explain_unseen.toml"):
        with open(os.path.join(ROOT, "tests", "data", name), "rb") as f:
            for e in tomllib.load(f)["entry"]:
                out += [m.group(1) for m in re.finditer(r"(NCCL INFO .*)", e["text"])]
    return sorted(set(out))


def make_log(path, megabytes, kind="training"):
    if kind == "info":
        block = "".join("node%d:%d:%d [%d] %s\n" % (r // 4, 1000 + r, 2000 + r, r % 4, text)
                        for r in range(8) for text in _info_lines()).encode()
    else:
        block = (BODY * 20 + WARNING).encode()
    target = megabytes << 20
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        written = len(HEAD)
        while written < target:
            f.write(block)
            written += len(block)
        f.write(TAIL.encode())
    return os.path.getsize(path)


# envcheck explain as the CLI runs it, then this process's own peak memory (VmHWM, KiB)
# on stderr's last line.
WRAPPER = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
from envcheck import cli
assert os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__))) == sys.argv[2]
try:
    cli.entry(["explain", "--format", "json", sys.argv[1]])
finally:
    with open("/proc/self/status") as f:
        sys.stderr.write(next(l.split()[1] for l in f if l.startswith("VmHWM:")) + "\n")
"""


def run_once(path, root=ROOT):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, path, root], capture_output=True,
                          text=True, cwd=root)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit("explain exited %d: %s" % (proc.returncode, proc.stderr[-500:]))
    data = json.loads(proc.stdout)
    ids = [f["id"] for f in data["findings"]]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = int(proc.stderr.strip().splitlines()[-1])
    return wall, cpu, peak, ids, data["inputs"][0]["lines"]


def _row(label, actual, runs):
    walls = sorted(r[0] for r in runs)
    cpus = sorted(r[1] for r in runs)
    peak = max(r[2] for r in runs) / 1024
    return "| %.2f GiB%s | %s | %.1f (%.1f–%.1f) | %.1f (%.1f–%.1f) | %.0f | %s |" % (
        actual / (1 << 30), label, "{:,}".format(runs[0][4]), walls[len(walls) // 2],
        walls[0], walls[-1], cpus[len(cpus) // 2], cpus[0], cpus[-1], peak,
        ", ".join(runs[0][3]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2048], help="MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--log", choices=("training", "info"), default="training",
                    help="a training job's log (few hits), or NCCL_DEBUG=INFO output "
                         "(every line a hit)")
    ap.add_argument("--baseline", metavar="REV",
                    help="also run envcheck as it was at git revision REV (alternating)")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        trees = {"": ROOT}
        if args.baseline:
            rev = subprocess.run(["git", "rev-parse", "--short", args.baseline], cwd=ROOT,
                                 capture_output=True, text=True)
            if rev.returncode != 0:
                raise SystemExit("bench_explain: no git revision %r here" % args.baseline)
            base = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-base-"))
            subprocess.run("git archive %s | tar -x -C %s" % (rev.stdout.strip(), base),
                           shell=True, cwd=ROOT, check=True)
            trees = {", this tree": ROOT, ", at %s" % rev.stdout.strip(): base}
        _measure(args, trees)


def _measure(args, trees):
    with open("/proc/loadavg") as f:
        print("load average at start: %s (%d cores)" % (" ".join(f.read().split()[:3]),
                                                      os.cpu_count()))
    print("| log | lines | wall s (min–max) | CPU s (min–max) | peak RSS MiB | found |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        path = os.path.join(args.dir, "envcheck-explain-bench-%dm.log" % size)
        actual = make_log(path, size, args.log)
        try:
            runs = {label: [] for label in trees}
            for _ in range(args.runs):
                for label, root in trees.items():
                    runs[label].append(run_once(path, root))
        finally:
            os.unlink(path)
        for label in trees:
            print(_row(label, actual, runs[label]))
    with open("/proc/loadavg") as f:
        print("load average at end: %s" % " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
