"""Small built-in models for probes that need one when the user gave no ``--model``.

They live in a module of their own, at top level, because pickle, ``copy.deepcopy`` and
``torch.save`` find a class by its module and name: a class defined inside a probe
function cannot be pickled at all, which would hide the failure under test. Only
imported from inside probe functions, so it may import torch at the top.
"""

import torch


class ToyNet(torch.nn.Module):
    """Two linear layers; ``example_inputs()`` gives a batch for a forward pass."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))

    def example_inputs(self):
        g = torch.Generator().manual_seed(0)
        return (torch.randn(4, 8, generator=g).to(self.fc1.weight.device),)


class GroupHoldingNet(ToyNet):
    """The Open-Sora shape: a model that keeps its (sequence-parallel) group as an attribute."""

    def __init__(self, group):
        super().__init__()
        self.group = group


def build_toy(seed, device):
    torch.manual_seed(seed)
    return ToyNet().to(device)


class LayeredNet(torch.nn.Module):
    """A small multi-layer model for FSDP2: three blocks and a head, sharded one block at
    a time (``fsdp_units``) as TorchTitan shards transformer blocks. 20 rows per weight so
    that 3 ranks shard unevenly (7, 7, 6) and 2 ranks evenly."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16 if i == 0 else 20, 20), torch.nn.Tanh())
            for i in range(3))
        self.head = torch.nn.Linear(20, 5)
        self.fsdp_units = list(self.blocks)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def batch(self, rank, device):
        """Rank ``rank``'s batch: its own data, as data-parallel training has."""
        g = torch.Generator().manual_seed(1000 + rank)
        return (torch.randn(4, 16, generator=g).to(device),)
