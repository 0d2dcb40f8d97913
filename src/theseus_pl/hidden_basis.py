"""The principal directions of a predecessor's hidden states: where narrower successors' projections start.

The states are read where the layer stack passes them on (every layer's input, and the last layer's output), over
the real tokens of a few training batches (padding excluded), in eval mode and without gradients: the residual
stream the narrow successors replace, from the embeddings to the task head. Each state is taken about its own
mean over its ``H`` coordinates, what the layers' LayerNorms keep (``narrow_width`` says why), and the directions
are those of the largest mean square: the ``h``-dimensional subspace that loses the least of those states.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.encoder_layers import find_layer_stack
from theseus_pl.narrow_width import WidthProjection, check_hidden_size

log = logging.getLogger(__name__)


def principal_projection(
    model: PreTrainedModel,
    batches: Iterable[Mapping[str, torch.Tensor]],
    width: int,
    layers_path: str | None = None,
) -> WidthProjection:
    """The projections between ``model``'s hidden width and ``width``, started from the top ``width`` principal
    directions of its hidden states on ``batches`` (each about its own mean) and the states' average."""
    full = getattr(model.config, check_hidden_size(model.config, width).hidden)
    layers = list(find_layer_stack(model, layers_path).layers)
    total, products, count = torch.zeros(full, dtype=torch.float64), torch.zeros(full, full, dtype=torch.float64), 0
    mask = torch.ones(0)

    def accumulate(states: torch.Tensor) -> None:
        nonlocal total, products, count
        real = states[mask.bool()].double().cpu()  # (real tokens, hidden)
        total += real.sum(dim=0)
        centred = real - real.mean(dim=1, keepdim=True)
        products += centred.T @ centred
        count += real.shape[0]

    def entering(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        accumulate(args[0] if args else kwargs["hidden_states"])

    def leaving(_: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        accumulate(output[0] if isinstance(output, tuple) else output)

    hooks = [layer.register_forward_pre_hook(entering, with_kwargs=True) for layer in layers]
    hooks.append(layers[-1].register_forward_hook(leaving))
    training, device = model.training, next(model.parameters()).device
    try:
        model.eval()
        with torch.no_grad():
            for batch in batches:
                inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
                mask = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"]))
                model(**inputs)
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    if count <= width:
        raise ValueError(
            f"theseus.successor.hidden_size={width}: its projections start from a PCA of the predecessor's hidden "
            f"states, which needs more than {width} token states; the calibration rows gave {count}."
        )
    energies, directions = torch.linalg.eigh(products / count)
    log.info(
        "theseus.successor.hidden_size=%d: the top %d directions hold %.1f%% of the hidden states' mean square "
        "about each token's mean", width, width, 100 * float(energies.flip(0)[:width].sum() / energies.sum()),
    )  # fmt: skip
    dtype = next(model.parameters()).dtype
    top = directions.flip(1)[:, :width].T.contiguous()
    return WidthProjection(top.to(dtype), (total / count).to(dtype)).to(device)
