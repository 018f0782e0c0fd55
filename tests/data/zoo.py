"""The model zoo of tests/test_model_zoo.py: real architectures from the packages users
train with (tiny configurations, built from configs: no download), and the shapes that
break training code. Each factory is what a user passes to ``envcheck run --model
zoo.py:NAME``; tests/data/zoo_truth.py runs the same factories the way training
scripts do, without envcheck.

Every factory seeds itself, so that every rank builds the same model (as a training
script does before DDP broadcasts rank 0's weights), except ``rank_dependent``.
"""

import torch


def _tokens(model, n=8, vocab=64):
    model.example_inputs = (torch.arange(n).reshape(1, n) % vocab,)
    return model


def gpt2():
    """Hugging Face GPT-2: lm_head tied to the token embedding; blocks in a ModuleList."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=64, n_positions=16)
    return _tokens(GPT2LMHeadModel(config))


def llama():
    """Hugging Face Llama: rotary embedding buffers (non-persistent), tied embeddings."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                         max_position_embeddings=16, tie_word_embeddings=True)
    return _tokens(LlamaForCausalLM(config))


def vit():
    """Hugging Face ViT: an image classifier, blocks in a ModuleList."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=32, image_size=8, patch_size=4, num_channels=3,
                       num_labels=3)
    model = ViTForImageClassification(config)
    model.example_inputs = (torch.linspace(-1, 1, 3 * 8 * 8).reshape(1, 3, 8, 8),)
    return model


def resnet():
    """A ResNet (Hugging Face's port of torchvision's: one basic block per stage):
    BatchNorm running statistics and num_batches_tracked buffers. torchvision itself
    is not in the zoo: its only wheel for torch 2.13 here is a CUDA build, whose ops
    do not load on the CPU torch (and then break transformers' imports)."""
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                          layer_type="basic", num_labels=3)
    model = ResNetForImageClassification(config)
    model.example_inputs = (torch.linspace(-1, 1, 2 * 3 * 16 * 16).reshape(2, 3, 16, 16),)
    return model


def titan_llama3():
    """TorchTitan's own llama3 Transformer: its layers in a ModuleDict, no fsdp_units
    declared (TorchTitan shards it in its own parallelize code), rotary freqs_cis
    buffer."""
    from torchtitan.models.llama3 import Transformer, TransformerModelArgs

    torch.manual_seed(0)
    model = Transformer(TransformerModelArgs(dim=32, n_layers=2, n_heads=4, vocab_size=64,
                                             max_seq_len=16))
    with torch.no_grad():  # as TorchTitan's trainer does, after building on meta
        model.init_weights()
    return _tokens(model)


class Blocks(torch.nn.Module):
    """ModuleDict of blocks, an output head tied to the embedding, a persistent and a
    non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.blocks = torch.nn.ModuleDict({
            "a": torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()),
            "b": torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())})
        self.head = torch.nn.Linear(16, 64, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.tensor(0.5))
        self.register_buffer("positions", torch.arange(8.0), persistent=False)
        self.example_inputs = (torch.arange(8).reshape(1, 8),)

    def forward(self, tokens):
        x = self.embed(tokens) + self.positions[: tokens.shape[1], None] * 0.01
        for block in self.blocks.values():
            x = x + block(x)
        return self.head(x * self.scale)


def blocks():
    torch.manual_seed(0)
    return Blocks()


class GroupHolder(torch.nn.Module):
    """Open-Sora's shape: attention layers keep their sequence-parallel process group."""

    def __init__(self):
        super().__init__()
        import torch.distributed as dist

        group = dist.new_group(ranks=list(range(dist.get_world_size())))
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))
        for layer in self.layers:
            layer.sp_group = group
        self.example_inputs = (torch.ones(2, 8),)

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return x


def group_holder():
    torch.manual_seed(0)
    return GroupHolder()


def rank_dependent(rank):
    """A model whose shapes depend on the rank (a bug DDP finds only on some ranks)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4 + rank), torch.nn.Linear(4 + rank, 2))
    model.example_inputs = (torch.ones(2, 4),)
    return model
