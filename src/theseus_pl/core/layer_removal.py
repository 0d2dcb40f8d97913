"""The depth-compression baselines Theseus is compared with on decoder LMs: which layers to remove, and the model
without them.

- ShortGPT (Men et al., 2024) removes the layers of least *block influence*, ``1 - cos(x_in, x_out)`` averaged
  over the tokens of calibration text: a layer that barely turns the hidden state does little.
- LLM-Streamline (Chen et al., 2024) replaces the contiguous block whose input and output are most alike (the
  same cosine, from the block's first input to its last output) by one lightweight layer trained to map the one to
  the other.
- Truncation keeps the bottom layers.

:func:`keep_layers` builds any of these as a plain model of the predecessor's class with fewer layers, the kept
layers renumbered for the KV cache; the predecessor is not changed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.core.decoders import renumber_layers
from theseus_pl.core.families import find_layer_stack


def layer_boundary_states(
    model: PreTrainedModel, batches: Iterable[Mapping[str, torch.Tensor]], layers_path: str | None = None
) -> Iterable[tuple[list[torch.Tensor], torch.Tensor]]:
    """For each batch, the hidden states entering each layer and leaving the last one (positions the attention
    mask keeps, flattened to ``tokens x hidden``), from one forward pass without gradients."""
    layers = find_layer_stack(model, layers_path).layers
    captured: list[torch.Tensor] = []

    def record_input(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        captured.append(args[0] if args else kwargs["hidden_states"])

    def record_output(_: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        captured.append(output[0] if isinstance(output, tuple) else output)

    hooks = [layer.register_forward_pre_hook(record_input, with_kwargs=True) for layer in layers]
    hooks.append(layers[-1].register_forward_hook(record_output))
    training = model.training
    model.eval()
    try:
        for batch in batches:
            captured.clear()
            inputs = {name: value for name, value in batch.items() if name != "labels"}
            with torch.no_grad():
                model(**inputs, use_cache=False)
            keep = inputs["attention_mask"].bool() if "attention_mask" in inputs else None
            states = [state[keep] if keep is not None else state.flatten(0, 1) for state in captured]
            yield [state.float() for state in states[:-1]], states[-1].float()
    finally:
        for hook in hooks:
            hook.remove()
        model.train(training)


def span_similarity(
    model: PreTrainedModel,
    batches: Iterable[Mapping[str, torch.Tensor]],
    length: int = 1,
    layers_path: str | None = None,
) -> torch.Tensor:
    """For each run of ``length`` consecutive layers (by its first layer), the cosine similarity of the hidden state
    entering the run and the one leaving it, averaged over every kept token of ``batches``."""
    count = len(find_layer_stack(model, layers_path).layers)
    if not 1 <= length <= count:  # checked before any forward pass: no hook is left on the model
        raise ValueError(f"A run of {length} layers does not fit a model of {count} layers.")
    total, tokens = None, 0
    for entering, leaving in layer_boundary_states(model, batches, layers_path):
        states = [*entering, leaving]
        sums = torch.stack(
            [F.cosine_similarity(states[i], states[i + length], dim=-1).sum() for i in range(len(states) - length)]
        )
        total = sums if total is None else total + sums
        tokens += len(leaving)
    if total is None or tokens == 0:
        raise ValueError("No calibration token: give at least one batch with a kept position.")
    return total / tokens


def block_influence(
    model: PreTrainedModel, batches: Iterable[Mapping[str, torch.Tensor]], layers_path: str | None = None
) -> torch.Tensor:
    """ShortGPT's block influence of each layer: ``1 - cos(layer input, layer output)``, averaged over every kept
    token of ``batches``. Low means the layer changes little."""
    return 1 - span_similarity(model, batches, 1, layers_path)


def least_influential(influence: torch.Tensor, count: int) -> list[int]:
    """The ``count`` layers of least influence, ascending by index (ties: the earlier layer first)."""
    if not 0 <= count < len(influence):
        raise ValueError(f"Cannot remove {count} of {len(influence)} layers: keep at least one.")
    order = sorted(range(len(influence)), key=lambda i: (float(influence[i]), i))
    return sorted(order[:count])


def layers_kept_by_influence(
    model: PreTrainedModel,
    batches: Iterable[Mapping[str, torch.Tensor]],
    count: int,
    layers_path: str | None = None,
) -> list[int]:
    """The ``count`` layers ShortGPT keeps, ascending: all but those of least block influence on ``batches``."""
    influence = block_influence(model, batches, layers_path)
    removed = set(least_influential(influence, len(influence) - count))
    return [i for i in range(len(influence)) if i not in removed]


def most_similar_block(
    model: PreTrainedModel,
    batches: Iterable[Mapping[str, torch.Tensor]],
    length: int,
    layers_path: str | None = None,
) -> int:
    """LLM-Streamline's choice: the first layer of the run of ``length`` consecutive layers whose input and output
    hidden states are most alike."""
    return int(span_similarity(model, batches, length, layers_path).argmax())


def keep_layers(
    model: PreTrainedModel,
    kept: Sequence[int],
    layers_path: str | None = None,
) -> PreTrainedModel:
    """A copy of ``model`` with only the layers ``kept`` (in order); its config says the new depth and the layers are
    renumbered from 0."""
    stack = find_layer_stack(model, layers_path)
    layers = stack.layers
    if not kept or sorted(set(kept)) != list(kept) or kept[-1] >= len(layers) or kept[0] < 0:
        raise ValueError(f"kept={list(kept)} must be ascending layer indices of the model's {len(layers)} layers.")
    chosen = nn.ModuleList(layers[i] for i in kept)
    setattr(stack.parent, stack.attribute, chosen)
    try:
        compact = copy.deepcopy(model)
    finally:
        setattr(stack.parent, stack.attribute, layers)
    compact.config.num_hidden_layers = len(kept)
    layer_types = getattr(model.config, "layer_types", None)
    if layer_types:  # each kept layer keeps its attention type
        compact.config.layer_types = [layer_types[i] for i in kept]
    renumber_layers(compact.get_submodule(stack.path), start=0)
    return compact


class _BlockPassed(Exception):
    """Raised by a hook once the block's output is seen: the layers above it need not run."""


def block_input_output(
    model: PreTrainedModel,
    inputs: Mapping[str, torch.Tensor],
    start: int,
    length: int,
    layers_path: str | None = None,
) -> tuple[torch.Tensor, tuple[Any, ...], dict[str, Any], torch.Tensor]:
    """The hidden states entering layer ``start``, the other arguments the model gave that layer (positions, mask,
    rotary embeddings), and the hidden states leaving layer ``start + length - 1``, without gradients. The forward
    pass stops there: the layers above the block never run."""
    layers = find_layer_stack(model, layers_path).layers
    seen: dict[str, Any] = {}

    def record_input(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen["args"], seen["kwargs"] = args, kwargs

    def record_output(_: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        seen["output"] = output[0] if isinstance(output, tuple) else output
        raise _BlockPassed

    hooks = [
        layers[start].register_forward_pre_hook(record_input, with_kwargs=True),
        layers[start + length - 1].register_forward_hook(record_output),
    ]
    try:
        with torch.no_grad():
            model(**{name: value for name, value in inputs.items() if name != "labels"}, use_cache=False)
    except _BlockPassed:
        pass
    finally:
        for hook in hooks:
            hook.remove()
    args, kwargs = seen["args"], dict(seen["kwargs"])
    hidden = args[0] if args else kwargs.pop("hidden_states")
    return hidden, tuple(args[1:]), kwargs, seen["output"]
