"""The least any multi-process check can cost: N ranks (default 2), each a fresh Python
that imports torch, joins a gloo process group and meets at one barrier.

    python bench/bare_job.py [--nproc N]
"""

import argparse
import os
import socket
import subprocess
import sys

RANK = r"""
import datetime, os, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
dist.barrier()
os._exit(0)
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, "-c", RANK], env=dict(
        os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
        WORLD_SIZE=str(args.nproc))) for rank in range(args.nproc)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit("bare job failed: exit codes %s" % codes)


if __name__ == "__main__":
    main()
