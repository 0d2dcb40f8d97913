"""Tiny random causal language models of every supported decoder family: no downloads."""

from __future__ import annotations

import copy
import hashlib

import torch
from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
from tokenizers.models import BPE, WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
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


_TEXT = (
    "the a of and to in is was it for on that with as by at from his her they we you he she this be are not or an "
    "said new more one all year people time state nation work family president speech economy jobs school"
)
_WORDS = _TEXT.split()


def tiny_lm_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer of 4 special and 53 words (ids below the tiny decoders' vocabulary), with an
    end-of-text token as every causal LM's tokenizer has."""
    vocab = {token: i for i, token in enumerate(["<pad>", "<s>", "</s>", "<unk>", *_WORDS])}
    assert len(vocab) <= DECODER_VOCAB
    backend = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def tiny_bpe_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (the kind GPT-2, Llama 3 and SmolLM use, which GGUF files carry) of 300 tokens,
    trained on the tiny documents, with an end-of-text token and a chat template."""
    backend = Tokenizer(BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    backend.train_from_iterator(tiny_documents(40), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>")  # fmt: skip
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    return tokenizer


def tiny_documents(count: int = 10, words: int = 30, seed: int = 0) -> list[str]:
    """``count`` random texts of ``words`` words of the tiny tokenizer's vocabulary."""
    generator = torch.Generator().manual_seed(seed)
    picks = torch.randint(0, len(_WORDS), (count, words), generator=generator)
    return [" ".join(_WORDS[i] for i in row) for row in picks.tolist()]


class InMemoryText:
    """A text source of given documents (the tests' stand-in for files)."""

    def __init__(self, documents: list[str]) -> None:
        self._documents = documents
        self.reads = 0

    def documents(self) -> list[str]:
        self.reads += 1
        return list(self._documents)

    def fingerprint(self) -> str:
        return "memory:" + hashlib.sha256("\0".join(self._documents).encode()).hexdigest()

    def describe(self) -> str:
        return f"{len(self._documents)} in-memory documents"
