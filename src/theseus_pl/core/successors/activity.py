"""How strongly each feed-forward neuron of each predecessor layer fires on real inputs.

``importance=activation`` keeps the neurons whose mean absolute activation on a few training batches, times the
norm of their outgoing weights, is largest: how far each neuron actually moves the hidden state on the task's
text, where the magnitude score only bounds it. The activations are read where the family's contracting Linear
takes them in (a forward pre-hook), over the real tokens of each batch (padding excluded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.core.families import feed_forward_of, find_layer_stack
from theseus_pl.core.successors.real_tokens import RealTokens


def neuron_activity(
    model: PreTrainedModel, batches: Iterable[Mapping[str, torch.Tensor]], layers_path: str | None = None
) -> dict[nn.Module, torch.Tensor]:
    """Each layer of ``model`` (the module object) mapped to its neurons' mean absolute activation over the real
    tokens of ``batches``, in eval mode and without gradients."""
    layout = feed_forward_of(model.config)
    layers = list(find_layer_stack(model, layers_path).layers)
    totals = [torch.zeros(layer.get_submodule(layout.contract).in_features) for layer in layers]
    tokens = RealTokens()

    def accumulate(index: int) -> Any:
        def hook(_: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            totals[index] += tokens.of(args[0]).abs().sum(dim=0).float().cpu()  # over (real tokens, neurons)

        return hook

    hooks = [
        layer.get_submodule(layout.contract).register_forward_pre_hook(accumulate(i)) for i, layer in enumerate(layers)
    ]
    tokens.run(model, batches, hooks)
    if tokens.count == 0:
        raise ValueError("importance=activation needs at least one token of training text to measure activations on.")
    return {layer: total / tokens.count for layer, total in zip(layers, totals, strict=True)}
