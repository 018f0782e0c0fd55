"""A 4-rank job on CPU (gloo) where rank 2 dies of a bug in its own code: it opens a
file that is not there. The other ranks are waiting in an all_reduce for it and die of
gloo's "Connection closed by peer". Run with real torchrun by
tests/test_explain_structure.py (and kept as torchrun-4rank-user-error.log):

    python -m torch.distributed.run --standalone --nproc_per_node 4 --tee 3 \\
        tests/data/explain/torchrun_user_error.py
"""

import os
import time

import torch
import torch.distributed as dist


def load_labels(path):
    with open(path) as f:  # the bug: the file is not there
        return f.read().split()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dist.barrier()
    if rank == 2:
        time.sleep(0.5)  # the others are in the all_reduce by now
        load_labels(os.path.join(os.path.dirname(__file__), "labels-missing.txt"))
    x = torch.ones(4)
    dist.all_reduce(x)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
