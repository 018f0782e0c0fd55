"""The smoke test a user writes by hand before trusting a machine with distributed training.

N ranks (default 2) started with torch.multiprocessing, each: init gloo, all_reduce, DDP
on a small model, one backward, barrier. This is the baseline ``bench_run.py`` holds
envcheck to: envcheck checks far more, and should not take longer than this does.

    python bench/smoke_test.py [--nproc N]
"""

import argparse
import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def rank_main(rank, world_size, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    assert int(t[0]) == world_size * (world_size + 1) // 2, t
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 1)))
    model(torch.randn(8, 16)).sum().backward()
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(args.nproc, port), nprocs=args.nproc)


if __name__ == "__main__":
    main()
