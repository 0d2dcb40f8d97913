"""Successor layers narrower than the predecessor's hidden width, and the learned projections around them.

With ``hidden_size=h`` every successor layer runs at width ``h``. One pair of learned
projections, shared by all successors, maps the predecessor's hidden states down to ``h`` where a run of
consecutive successors begins and back up where it ends. Consecutive successors pass their width-``h`` states
straight on, so the all-successor model is embeddings, down, ``n`` narrow layers, up, task head: the model that is
validated is the model that is exported, layer for layer.

How it starts. The projections come from the principal directions ``P`` (``h`` x ``H``) of the predecessor's
hidden states, each token's state taken about its own mean (``hidden_basis``): ``down(x) = P x`` and
``up(z) = P^T z + (I - P^T P) mean``, which restores what ``P`` drops as its average over the calibration tokens.
Each narrow layer is its source layer seen through that map: every Linear reading the hidden state reads
``up(z)``, every Linear writing into it writes through ``P``, so that its residual sums are ``down(y)`` of the
predecessor's sums ``y``. Inside attention each head keeps the ``h / heads`` of its dimensions with the largest
weight magnitude (queries and keys by the product of their rows' norms, values by their row norm times the output
column's norm), the queries rescaled so that attention scores keep their size.

Why about each token's mean: a LayerNorm subtracts each token's mean and divides by its spread. ``P`` is orthogonal
to that mean's direction, so ``down`` sees only what the predecessor's LayerNorms keep. A narrow LayerNorm still
cannot equal ``down`` of the predecessor's (it takes its mean and spread over other coordinates), so its weight and
bias are fitted, coordinate by coordinate, by least squares: on the calibration tokens, the narrow LayerNorm of
``down(y)`` against ``down`` of the predecessor's LayerNorm of ``y``, for the inputs ``y`` the predecessor's
LayerNorm received (``hidden_basis.fitted_norms``). The figures that chose this start are on the docs' results page
("Narrower hidden width"). Training learns the rest, the projections being successor parameters trained with the layers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn
from transformers import PretrainedConfig

from theseus_pl.core.families import Attention, FeedForward, attention_of, feed_forward_of


def hidden_size_problem(config: PretrainedConfig, width: int) -> str | None:
    """Why ``hidden_size=width`` cannot narrow this predecessor's layers; None when it can."""
    try:
        layout = attention_of(config)
    except ValueError as error:
        return str(error)
    full, heads = getattr(config, layout.hidden), getattr(config, layout.heads)
    if not 1 <= width < full:
        return f"hidden_size={width} must be at least 1 and below the predecessor's {full}."
    if width % heads:
        return (
            f"hidden_size={width} must be a multiple of the predecessor's {heads} attention heads (each head keeps "
            f"width / heads of its dimensions), e.g. {max(heads, width - width % heads)}."
        )
    return None


def check_hidden_size(config: PretrainedConfig, width: int) -> Attention:
    """The family's attention layout; a ValueError saying why when ``width`` cannot be used."""
    problem = hidden_size_problem(config, width)
    if problem:
        raise ValueError(problem)
    return attention_of(config)


class Basis(NamedTuple):
    """What a narrow layer's Linears are started from: ``up(z) = directions^T z + up_bias``, and ``directions``
    to write into the narrow hidden state."""

    directions: torch.Tensor  # (h, H)
    up_bias: torch.Tensor  # (H,)


@dataclass(frozen=True)
class NarrowStart:
    """What narrow successors start from, measured on the predecessor: the shared projections, and for each of the
    predecessor's LayerNorms (the module) the narrow LayerNorm's fitted weight and bias."""

    projection: WidthProjection
    norms: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]]


class WidthProjection(nn.Module):
    """The learned maps between the predecessor's hidden width and the successors': ``down`` and ``up``."""

    def __init__(self, directions: torch.Tensor, mean: torch.Tensor) -> None:
        """``directions``: (h, H) with orthonormal rows; ``mean``: (H,), the average hidden state, whose part outside
        the directions ``up`` restores."""
        super().__init__()
        width, full = directions.shape
        self.down = nn.Linear(full, width).to(directions.dtype)
        self.up = nn.Linear(width, full).to(directions.dtype)
        with torch.no_grad():
            self.down.weight.copy_(directions)
            self.down.bias.zero_()
            self.up.weight.copy_(directions.T)
            self.up.bias.copy_(mean - directions.T @ (directions @ mean))

    @property
    def width(self) -> int:
        return self.down.out_features

    def basis(self) -> Basis:
        """The maps as they are now, which the narrow layers are started from."""
        return Basis(self.down.weight.detach(), self.up.bias.detach())


class NarrowWidthSuccessor(nn.Module):
    """A successor layer at the narrow width, between the shared projections.

    ``enters``: the hidden states it is given are at the predecessor's width (it starts a run of successors), so it
    projects them down first; ``leaves``: the next module is a predecessor module or the task head, so it projects
    its output up. ``TheseusModel.set_gate`` sets both from the gate; for the all-successor model only the first
    enters and only the last leaves.
    """

    def __init__(self, layer: nn.Module, projection: WidthProjection) -> None:
        super().__init__()
        self.layer = layer
        self.projection = projection
        self.enters = True
        self.leaves = True

    def place_in_run(self, enters: bool, leaves: bool) -> None:
        """Where it stands in its run of consecutive successors (:class:`~theseus_pl.core.successors.RunAware`)."""
        self.enters, self.leaves = enters, leaves

    def compact_config_changes(self, config: PretrainedConfig) -> dict[str, int]:
        """The narrow width, and the narrow layer's feed-forward width (:class:`~theseus_pl.core.successors.Reshaping`):
        ``hidden_size`` stays the embeddings' and the task head's."""
        feed_forward = feed_forward_of(config)
        return {
            "narrow_hidden_size": self.projection.width,
            feed_forward.width: self.layer.get_submodule(feed_forward.expand).out_features,
        }

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.enters:
            hidden_states = self.projection.down(hidden_states)
        output = self.layer(hidden_states, *args, **kwargs)
        if not self.leaves:
            return output
        if isinstance(output, tuple):
            return (self.projection.up(output[0]), *output[1:])
        return self.projection.up(output)


def narrow_width_layer(
    source: nn.Module,
    config: PretrainedConfig,
    start: NarrowStart,
    feed_forward: FeedForward,
    kept_neurons: torch.Tensor,
) -> nn.Module:
    """A layer of ``source``'s class at the projections' width, keeping the feed-forward neurons ``kept_neurons``,
    started from ``source`` as the module docstring states."""
    projection = start.projection
    layout = check_hidden_size(config, projection.width)
    full, heads = getattr(config, layout.hidden), getattr(config, layout.heads)
    narrow_config = copy.deepcopy(config)
    setattr(narrow_config, layout.hidden, projection.width)
    setattr(narrow_config, feed_forward.width, len(kept_neurons))
    reference = source.get_submodule(layout.query).weight
    layer = type(source)(narrow_config).to(device=reference.device, dtype=reference.dtype)
    basis = projection.basis()

    paths = (layout.query, layout.key, layout.value, layout.output)
    query, key, value, output = (source.get_submodule(path) for path in paths)
    head, narrow_head = full // heads, projection.width // heads
    scored = _kept_per_head(query.weight.norm(dim=1) * key.weight.norm(dim=1), heads, narrow_head)
    carried = _kept_per_head(value.weight.norm(dim=1) * output.weight.norm(dim=0), heads, narrow_head)
    reads = {
        layout.query: (query, scored, (narrow_head / head) ** 0.5),  # scores sum over fewer dimensions
        layout.key: (key, scored, 1.0),
        layout.value: (value, carried, 1.0),
        feed_forward.expand: (source.get_submodule(feed_forward.expand), kept_neurons, 1.0),
    }
    with torch.no_grad():
        for path, (linear, rows, scale) in reads.items():
            _load(layer.get_submodule(path), *_reading(linear, rows, basis, scale))
        for path, columns in ((layout.output, carried), (feed_forward.contract, kept_neurons)):
            _load(layer.get_submodule(path), *_writing(source.get_submodule(path), columns, basis))
        for path in (layout.attention_norm, layout.output_norm):
            _load(layer.get_submodule(path), *start.norms[source.get_submodule(path)])
    return layer


def _kept_per_head(score: torch.Tensor, heads: int, width: int) -> torch.Tensor:
    """The flat indices of the ``width`` highest-scoring dimensions of each head, head by head, in order."""
    per_head = score.view(heads, -1)
    kept = per_head.topk(width, dim=1).indices.sort(dim=1).values
    return (kept + torch.arange(heads, device=score.device)[:, None] * per_head.shape[1]).flatten()


def _reading(linear: nn.Linear, rows: torch.Tensor, basis: Basis, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Weight and bias of ``linear``'s ``rows`` reading ``up(z)`` in place of the hidden state."""
    weight = linear.weight.index_select(0, rows)
    return scale * weight @ basis.directions.T, scale * (linear.bias.index_select(0, rows) + weight @ basis.up_bias)


def _writing(linear: nn.Linear, columns: torch.Tensor, basis: Basis) -> tuple[torch.Tensor, torch.Tensor]:
    """Weight and bias of ``linear`` reading only ``columns`` and writing through ``P`` (a residual term: the
    residual carries ``down``'s bias already)."""
    return basis.directions @ linear.weight.index_select(1, columns), basis.directions @ linear.bias


def _load(module: nn.Module, weight: torch.Tensor, bias: torch.Tensor) -> None:
    module.weight.copy_(weight)
    module.bias.copy_(bias)
