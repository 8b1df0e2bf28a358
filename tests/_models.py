"""Model builders shared by the tests: small, seeded, nothing downloaded."""

import torch


def resnet50():
    import torchvision

    return torchvision.models.resnet50(), lambda: (torch.randn(2, 3, 224, 224),)


def vit_b_16():
    import torchvision

    return torchvision.models.vit_b_16(), lambda: (torch.randn(1, 3, 224, 224),)


def gpt2():
    """GPT-2 small: 2 of its 12 layers in the suite (every op and module kind of the model), all 12 in breadth runs
    (bench/breadth.sh)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from conftest import BREADTH

    return GPT2LMHeadModel(GPT2Config(n_layer=12 if BREADTH else 2)), lambda: (torch.randint(0, 50257, (1, 128)),)


LLAMA_SMALL = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=8,
                   num_key_value_heads=2, vocab_size=1000, max_position_embeddings=256)


def llama(**cfg):
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**{**LLAMA_SMALL, **cfg})), lambda: (torch.randint(0, 1000, (2, 128)),)


MODELS = {"resnet50": resnet50, "vit_b_16": vit_b_16, "gpt2": gpt2, "llama": llama}


def build(name, device="cpu"):
    torch.manual_seed(0)
    with torch.device(device):
        model, make_inputs = MODELS[name]()
        inputs = make_inputs()
    return model, inputs


def train_step(model, inputs):
    """Forward, backward and one AdamW step."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if hasattr(model, "config"):  # transformers causal LM: labels give the loss
        loss = model(inputs[0], labels=inputs[0]).loss
    else:
        loss = model(*inputs).float().mean()
    loss.backward()
    opt.step()
