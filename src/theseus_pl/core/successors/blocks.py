"""A successor module other than a layer: an example of what a factory of one's own can build."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig

from theseus_pl.core.successors.copied import copied_layer


class FeedForwardBlock(nn.Module):
    """A successor with no attention: the source layer's feed-forward network and its residual LayerNorm.

    It keeps each token's hidden state to itself (no mixing across tokens) at a fraction of a layer's cost; what
    the module's attention did must be learnt by the other modules. Called like a layer; returns a tensor.
    """

    def __init__(self, expand: nn.Linear, activation: nn.Module, contract: nn.Linear, norm: nn.LayerNorm) -> None:
        super().__init__()
        self.expand = expand
        self.activation = activation
        self.contract = contract
        self.norm = norm

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.norm(hidden_states + self.contract(self.activation(self.expand(hidden_states))))


def feed_forward_block(
    module_layers: Sequence[nn.Module], source: nn.Module, config: PretrainedConfig, **settings: Any
) -> FeedForwardBlock:
    """An example factory beyond copied layers: :class:`FeedForwardBlock` started from the source layer's
    feed-forward weights (narrowed as :func:`copied_layer` narrows them, with the same settings). BERT-like
    layers only (``intermediate.dense``, ``output.dense``, ``output.LayerNorm``); in a run,
    ``theseus.successor._target_=theseus_pl.core.successors.feed_forward_block``."""
    if not all(_has(source, path) for path in ("intermediate.dense", "output.dense", "output.LayerNorm")):
        raise ValueError(
            "feed_forward_block knows the BERT-like layer layout (intermediate.dense, output.dense, output.LayerNorm), "
            f"not model type {config.model_type!r}."
        )
    if settings.get("hidden_size") is not None:
        raise ValueError("feed_forward_block runs at the predecessor's hidden width: leave hidden_size out.")
    layer = copied_layer(module_layers, source, config, **settings)
    return FeedForwardBlock(
        layer.intermediate.dense, layer.intermediate.intermediate_act_fn, layer.output.dense, layer.output.LayerNorm
    )


def _has(module: nn.Module, path: str) -> bool:
    try:
        module.get_submodule(path)
    except AttributeError:
        return False
    return True
