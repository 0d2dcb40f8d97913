"""Tiny random causal language models of every supported decoder family: no downloads."""

from __future__ import annotations

import copy

import torch
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    PretrainedConfig,
    PreTrainedModel,
    Qwen2Config,
)

DECODER_VOCAB = 61
_LLAMA_LIKE = dict(
    vocab_size=DECODER_VOCAB,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention, as SmolLM2 and most Llama-family models
    max_position_embeddings=64,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)
DECODER_CONFIGS: dict[str, PretrainedConfig] = {
    "llama": LlamaConfig(tie_word_embeddings=True, **_LLAMA_LIKE),
    "qwen2": Qwen2Config(**_LLAMA_LIKE),
    "mistral": MistralConfig(sliding_window=None, **_LLAMA_LIKE),
    "gpt2": GPT2Config(
        vocab_size=DECODER_VOCAB, n_embd=32, n_layer=4, n_head=4, n_positions=64, bos_token_id=1, eos_token_id=2
    ),
}
DECODER_FAMILIES = list(DECODER_CONFIGS)


def tiny_decoder(family: str = "llama", seed: int = 0, **overrides: object) -> PreTrainedModel:
    """A randomly initialised 4-layer causal language model of ``family``, in eval mode."""
    torch.manual_seed(seed)
    config = copy.deepcopy(DECODER_CONFIGS[family])
    for name, value in overrides.items():
        setattr(config, name, value)
    return AutoModelForCausalLM.from_config(config).eval()


def tiny_token_ids(batch_size: int = 2, length: int = 12, seed: int = 1) -> torch.Tensor:
    """Token ids above the special ones (0-2), so no row ends early at an end-of-text token."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, DECODER_VOCAB, (batch_size, length), generator=generator)
