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
