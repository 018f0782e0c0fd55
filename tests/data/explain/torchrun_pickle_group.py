"""A real 4-rank failure, for tests/test_explain_torchrun.py: every rank keeps its
process group on the model and deep-copies the model for an EMA (the Open-Sora pattern,
hpcaitech/Open-Sora#49), which raises on every rank.

Made on CPU with gloo:

    cd tests/data/explain && torchrun --standalone --nproc-per-node 4 --tee 3 \
        torchrun_pickle_group.py > torchrun-4rank-pickle-group.log 2>&1

(--tee 3: torchrun copies each rank's stdout and stderr to its own with a [default3]:
prefix, as jobs that keep every rank's output do; the ranks' tracebacks also come with
torch's [rank3]: prefix.) The ranks print a few steps first, so that their lines
interleave as a training job's do.
"""

import copy
import time

import torch
import torch.distributed as dist


class Block(torch.nn.Module):
    def __init__(self, group):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.group = group  # the sequence-parallel group, kept on the module

    def forward(self, x):
        y = self.linear(x)
        dist.all_reduce(y, group=self.group)
        return y


def main():
    dist.init_process_group("gloo")
    model = Block(dist.new_group(list(range(dist.get_world_size()))))
    rank = dist.get_rank()
    for step in range(3):
        loss = model(torch.ones(2, 4)).sum().item()
        print("rank %d step %d loss %.4f" % (rank, step, loss), flush=True)
        time.sleep(0.05)
    ema = copy.deepcopy(model)  # raises on every rank
    print(ema)


if __name__ == "__main__":
    main()
