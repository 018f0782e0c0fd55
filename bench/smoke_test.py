"""The smoke test a user writes by hand before trusting a machine with distributed training.

N ranks (default 2), started the way torchrun starts them: one fresh Python per rank with
RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set (the parent never imports torch). Each
rank: init gloo, all_reduce, DDP on a small model, one backward, barrier. This is the
baseline ``bench_run.py`` holds envcheck to: envcheck checks far more, and should not take
longer than this does.

    python bench/smoke_test.py [--nproc N]
"""

import argparse
import os
import socket
import subprocess
import sys


def rank_main():
    import datetime

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    world_size = dist.get_world_size()
    t = torch.ones(4) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    assert int(t[0]) == world_size * (world_size + 1) // 2, t
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 1)))
    model(torch.randn(8, 16)).sum().backward()
    dist.barrier()
    dist.destroy_process_group()
    # Leave without Python's teardown, as envcheck's ranks do: with torch._dynamo loaded
    # it can take seconds, and a baseline that pays it would flatter envcheck.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        return rank_main()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(rank)],
                              env=dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                       RANK=str(rank), WORLD_SIZE=str(args.nproc)))
             for rank in range(args.nproc)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit("smoke test failed: exit codes %s" % codes)


if __name__ == "__main__":
    main()
