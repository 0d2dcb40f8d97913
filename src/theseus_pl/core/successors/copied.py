"""The paper's successor, a copy of a predecessor layer, and the narrower feed-forward networks it can keep.

Every successor factory is called as ``factory(module_layers, source, config, **settings)``: the run of predecessor
layers the successor replaces, the predecessor layer ``init`` chose to start it from, the predecessor's config, and
the factory's own settings. It returns a module that takes the same arguments as a predecessor layer and returns
hidden states of the same shape. :func:`copied_layer` is the default; ``blocks.feed_forward_block`` is an example of
another kind of module, and ``factory.successor_factory`` binds the settings and what they need measured.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from enum import StrEnum

import torch
from torch import nn
from transformers import PretrainedConfig

from theseus_pl.core.families import feed_forward_of
from theseus_pl.core.successors.narrow_width import NarrowStart, NarrowWidthSuccessor, narrow_width_layer


class Importance(StrEnum):
    """Which feed-forward neurons a narrower successor keeps."""

    MAGNITUDE = "magnitude"  # the largest |incoming weights| x |outgoing weights|
    RANDOM = "random"  # a seeded random choice: the baseline the magnitude score is measured against
    ACTIVATION = "activation"  # the largest mean |activation| on training batches x |outgoing weights|


def neuron_importance(expand: nn.Linear, contract: nn.Linear) -> torch.Tensor:
    """Each feed-forward neuron's magnitude: the norm of its incoming weights (bias included) times the norm of
    its outgoing weights.

    A neuron's output is ``contract[:, j] * act(expand[j] . x + b_j)``: the first norm bounds how strongly it can
    fire for a given input size, the second how far that moves the hidden state. It needs no data, so every
    successor of a run is built before the first batch, and it is the same score on every machine.
    """
    incoming = expand.weight
    if expand.bias is not None:
        incoming = torch.cat([incoming, expand.bias[:, None]], dim=1)
    return incoming.norm(dim=1) * contract.weight.norm(dim=0)


def kept_neurons(
    expand: nn.Linear,
    contract: nn.Linear,
    width: int,
    importance: Importance | str,
    seed: int = 0,
    activity: torch.Tensor | None = None,
) -> torch.Tensor:
    """The indices (ascending) of the ``width`` neurons a narrower feed-forward network keeps. ``activity``: the
    neurons' mean absolute activation on training text (``neuron_activity``), which ``activation`` needs."""
    importance = Importance(importance)
    if importance is Importance.MAGNITUDE:
        chosen = neuron_importance(expand, contract).topk(width).indices
    elif importance is Importance.ACTIVATION:
        if activity is None:
            raise ValueError(
                "importance='activation' needs the neurons' activity measured on training batches: build the factory "
                "with theseus_pl.successor_factory(model, batches, ...), or give importance='magnitude'."
            )
        chosen = (activity.to(contract.weight.device) * contract.weight.norm(dim=0)).topk(width).indices
    else:
        generator = torch.Generator().manual_seed(seed)
        chosen = torch.randperm(expand.out_features, generator=generator)[:width]
    return chosen.sort().values.to(expand.weight.device)


def _kept_linear(linear: nn.Linear, keep: torch.Tensor, dim: int) -> nn.Linear:
    """``linear`` with only the rows (dim 0: output neurons) or columns (dim 1: input neurons) in ``keep``."""
    weight = linear.weight.detach().index_select(dim, keep)
    narrow = nn.Linear(weight.shape[1], weight.shape[0], bias=linear.bias is not None)
    narrow = narrow.to(device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        narrow.weight.copy_(weight)
        if linear.bias is not None:
            narrow.bias.copy_(linear.bias.detach().index_select(0, keep) if dim == 0 else linear.bias.detach())
    return narrow


def narrow_feed_forward(
    layer: nn.Module,
    config: PretrainedConfig,
    width: int,
    importance: Importance | str,
    seed: int = 0,
    activity: torch.Tensor | None = None,
) -> nn.Module:
    """``layer`` (changed in place and returned) keeping ``width`` of its feed-forward neurons.

    The kept neurons keep their weights exactly, so the narrower layer equals the original one with the dropped
    neurons' outgoing weights set to zero.
    """
    layout = feed_forward_of(config)
    keep = kept_neurons_of(layer, config, width, importance, seed, activity)
    expand, contract = layer.get_submodule(layout.expand), layer.get_submodule(layout.contract)
    layer.set_submodule(layout.expand, _kept_linear(expand, keep, 0))
    layer.set_submodule(layout.contract, _kept_linear(contract, keep, 1))
    return layer


def kept_neurons_of(
    layer: nn.Module,
    config: PretrainedConfig,
    width: int | None,
    importance: Importance | str,
    seed: int = 0,
    activity: torch.Tensor | None = None,
) -> torch.Tensor:
    """The feed-forward neurons of ``layer`` a successor keeps: ``width`` of them by ``importance``, or all of
    them when ``width`` is None; a ValueError for a width not below the predecessor's."""
    layout = feed_forward_of(config)
    expand, contract = layer.get_submodule(layout.expand), layer.get_submodule(layout.contract)
    if width is None:
        return torch.arange(getattr(config, layout.width), device=expand.weight.device)
    problem = intermediate_size_problem(config, width)
    if problem:
        raise ValueError(problem)
    return kept_neurons(expand, contract, width, importance, seed, activity)


def intermediate_size_problem(config: PretrainedConfig, width: int) -> str | None:
    """Why ``intermediate_size=width`` cannot narrow this predecessor's feed-forward networks; None when it can."""
    try:
        layout = feed_forward_of(config)
    except ValueError as error:
        return str(error)
    full = getattr(config, layout.width)
    if not 1 <= width < full:
        return (
            f"intermediate_size={width} must be at least 1 and below {full}: a narrower successor must be below the "
            f"predecessor's feed-forward width, {full} ({layout.width} in its config)."
        )
    return None


def copied_layer(
    module_layers: Sequence[nn.Module],
    source: nn.Module,
    config: PretrainedConfig,
    intermediate_size: int | None = None,
    importance: Importance | str = Importance.ACTIVATION,
    seed: int = 0,
    activity: Mapping[nn.Module, torch.Tensor] | None = None,
    hidden_size: int | None = None,
    narrow_start: NarrowStart | None = None,
) -> nn.Module:
    """The paper's successor: a copy of the source layer; with ``intermediate_size``, keeping only that many of
    its feed-forward neurons, the most important by ``importance``. ``activity`` maps each predecessor layer to
    its neurons' measured activity (``importance="activation"``, the default); with ``hidden_size``, the layer runs
    at that width between shared projections, started from ``narrow_start``. Both are measured on the predecessor:
    :func:`theseus_pl.successor_factory` measures them and binds them here."""
    measured = activity[source] if activity is not None and intermediate_size is not None else None
    if hidden_size is None:
        layer = copy.deepcopy(source)
        if intermediate_size is None:
            return layer
        return narrow_feed_forward(layer, config, intermediate_size, importance, seed, measured)
    if narrow_start is None or narrow_start.projection.width != hidden_size:
        raise ValueError(
            f"hidden_size={hidden_size} needs the projections of that width its successors share, measured on the "
            "predecessor's hidden states: build the factory with theseus_pl.successor_factory(model, batches, ...)."
        )
    keep = kept_neurons_of(source, config, intermediate_size, importance, seed, measured)
    layer = narrow_width_layer(source, config, narrow_start, feed_forward_of(config), keep)
    return NarrowWidthSuccessor(layer, narrow_start.projection)
