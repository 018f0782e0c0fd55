"""The Open-Sora shape (its STDiT keeps the sequence-parallel group on attention
layers), small: the model dev/observe.py runs with --model mymodels.stdit:build_model.
tests/test_model_option.py runs this very file."""
import torch
import torch.distributed as dist


class Attention(torch.nn.Module):
    def __init__(self, dim, sp_group):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.sp_group = sp_group

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.proj(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)


class TinySTDiT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        sp_group = dist.new_group(ranks=list(range(dist.get_world_size())))
        self.blocks = torch.nn.ModuleList(Attention(8, sp_group) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x

    def example_inputs(self):
        return torch.ones(2, 3, 8)


def build_model():
    return TinySTDiT()
