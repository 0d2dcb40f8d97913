"""What progressive module replacing needs to know of decoder language models (Llama, Qwen2, Mistral, GPT-2).

A decoder's layer loop is the encoder's with two additions, and the replacing model handles both here:

- **The KV cache is kept by layer index**: each attention writes its keys and values at ``layer_idx``. A successor
  copied from predecessor layer ``i`` would write where that layer writes, so while the model is wrapped every
  successor gets an index after the predecessor's (``L + i``) and the model runs without a cache; the exported
  compact model numbers its ``n`` layers ``0 .. n-1`` and generates with the cache as any checkpoint does.
- **Per-layer attention types**: Qwen2 and others pick each layer's mask (full or sliding window) by its position
  in the list, ``config.layer_types[i]``. Wrapping puts module ``i`` at position ``i``, so only models whose layers
  all share one type can be wrapped, and the compact config keeps ``n`` of them.

The rotary embeddings and the causal mask are computed once by the model and passed to every layer, so they reach
predecessor and successor layers unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel

from theseus_pl.core.families import family_of


def load_causal_lm(name: str | Path) -> PreTrainedModel:
    """A causal LM (a folder or hub id) with fp32 weights, whatever dtype its files store. transformers 5 loads a
    checkpoint in its stored dtype, and decoders on the hub are mostly stored in bf16: trained so, AdamW's small
    steps would round away, and its scores would be a bf16 model's. The run's precision (autocast) decides what
    runs in bf16, and the frozen copies are cast where that pays (``lightning.distillation``)."""
    return AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32)


def is_decoder(model: PreTrainedModel) -> bool:
    """Whether the model generates text: a registered decoder family, or for a family nobody registered (its layers
    named by ``layers_path``), a model class that can generate."""
    family = family_of(model.config)
    return family.decoder if family is not None else model.can_generate()


def renumber_layers(layers: Iterable[nn.Module], start: int) -> None:
    """Give the layers consecutive cache indices from ``start``: every submodule's ``layer_idx`` (the attention's;
    transformers keeps no other) is its layer's position plus ``start``."""
    for offset, layer in enumerate(layers):
        for module in layer.modules():
            if isinstance(getattr(module, "layer_idx", None), int):
                module.layer_idx = start + offset


def check_decoder_fits(config: PretrainedConfig) -> None:
    """Refuse the decoders whose layers depend on their position in ways the replacing would change."""
    layer_types = getattr(config, "layer_types", None)
    if layer_types and len(set(layer_types)) > 1:
        raise ValueError(
            f"{config.model_type} layers of several attention types ({', '.join(sorted(set(layer_types)))}: "
            "config.layer_types) cannot be replaced module by module: the model chooses each layer's mask by its "
            "position in the list, which the replacing changes. Models whose layers share one type are supported."
        )
    if getattr(config, "scale_attn_by_inverse_layer_idx", False):
        raise ValueError(
            "scale_attn_by_inverse_layer_idx=True scales each GPT-2 layer's attention by its index, which the "
            "compact model's renumbering would change. Models without it (the default) are supported."
        )


def compact_decoder_config(config: PretrainedConfig, num_layers: int) -> dict[str, Any]:
    """The config values a compact decoder of ``num_layers`` layers changes besides the layer count."""
    layer_types = getattr(config, "layer_types", None)
    return {"layer_types": layer_types[:1] * num_layers} if layer_types else {}


def decoder_inputs(inputs: dict[str, Any], training: bool) -> dict[str, Any]:
    """The wrapped decoder's inputs with the KV cache off, refusing a cache asked for.

    While the model is wrapped its successor layers carry indices after the predecessor's (see the module's
    docstring), so a cache would be indexed neither as the predecessor's nor as the compact model's.
    """
    if inputs.get("use_cache"):
        when = "while training" if training else "on the wrapped model"
        raise ValueError(
            f"use_cache=True is not supported {when}: the replacing model runs its layers without the KV cache. "
            "Generate with the compact model (TheseusModel.to_compact_model()), which uses the cache."
        )
    return {**inputs, "use_cache": False}


def new_token_room(config: PretrainedConfig, prompt_tokens: int, wanted: int) -> int:
    """At most ``wanted`` tokens to generate after a prompt of ``prompt_tokens``, within the model's positions
    (``max_position_embeddings``, GPT-2's ``n_positions``): learned position embeddings (GPT-2's) end there, and a
    token past them is an IndexError; rotary models only degrade there (transformers warns)."""
    limit = getattr(config, "max_position_embeddings", None)
    return wanted if not limit else max(0, min(wanted, limit - prompt_tokens))


def perplexity_of(nll: float) -> float:
    """The perplexity of a mean negative log-likelihood ``nll`` (nats a token): ``exp(nll)``, and ``inf`` past the
    largest float (``nll`` above about 709.78, a diverged model's huge logits), where ``math.exp`` raised
    OverflowError and the validation or the deployment computing it crashed. The one rule for every perplexity."""
    try:
        return math.exp(nll)
    except OverflowError:
        return math.inf
