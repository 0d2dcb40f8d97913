"""What narrow successors start from, measured on the predecessor: the principal directions of its hidden states
(the projections) and least-squares fits of its LayerNorms at the narrow width.

The states are read where the layer stack passes them on (every layer's input, and the last layer's output), over
the real tokens of a few training batches (padding excluded), in eval mode and without gradients: the residual
stream the narrow successors replace, from the embeddings to the task head. Each state is taken about its own
mean over its ``H`` coordinates, what the layers' LayerNorms keep (``narrow_width`` says why), and the directions
are those of the largest mean square: the ``h``-dimensional subspace that loses the least of those states. A second
pass over the same batches reads what each LayerNorm receives, to fit its narrow counterpart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.core.families import attention_of, find_layer_stack
from theseus_pl.core.successors.narrow_width import NarrowStart, WidthProjection, check_hidden_size
from theseus_pl.core.successors.real_tokens import RealTokens

log = logging.getLogger(__name__)


def narrow_start(
    model: PreTrainedModel,
    batches: Sequence[Mapping[str, torch.Tensor]],
    width: int,
    layers_path: str | None = None,
) -> NarrowStart:
    """The projections to ``width`` (:func:`principal_projection`) and every LayerNorm's narrow fit
    (:func:`fitted_norms`), measured on ``batches``."""
    projection = principal_projection(model, batches, width, layers_path)
    return NarrowStart(projection, fitted_norms(model, batches, projection, layers_path))


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
    tokens = RealTokens()

    def accumulate(states: torch.Tensor) -> None:
        nonlocal total, products, count
        real = tokens.of(states).double().cpu()  # (real tokens, hidden)
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
    tokens.run(model, batches, hooks)
    if count <= width:
        raise ValueError(
            f"hidden_size={width}: its projections start from a PCA of the predecessor's hidden "
            f"states, which needs more than {width} token states; the calibration rows gave {count}."
        )
    energies, directions = torch.linalg.eigh(products / count)
    log.info(
        "hidden_size=%d: the top %d directions hold %.1f%% of the hidden states' mean square "
        "about each token's mean", width, width, 100 * float(energies.flip(0)[:width].sum() / energies.sum()),
    )  # fmt: skip
    parameter = next(model.parameters())
    top = directions.flip(1)[:, :width].T.contiguous()
    return WidthProjection(top.to(parameter.dtype), (total / count).to(parameter.dtype)).to(parameter.device)


def fitted_norms(
    model: PreTrainedModel,
    batches: Iterable[Mapping[str, torch.Tensor]],
    projection: WidthProjection,
    layers_path: str | None = None,
) -> dict[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    """Each LayerNorm of ``model``'s layers mapped to the weight and bias of a narrow LayerNorm that, on the real
    tokens of ``batches``, best gives ``down`` of its output from ``down`` of its input: per coordinate, the least
    squares line from the narrow LayerNorm's normalised input to that target."""
    layout = attention_of(model.config)
    layers = list(find_layer_stack(model, layers_path).layers)
    norms = [layer.get_submodule(path) for layer in layers for path in (layout.attention_norm, layout.output_norm)]
    sums = {norm: torch.zeros(4, projection.width, dtype=torch.float64) for norm in norms}  # n, n^2, t, n t
    tokens = RealTokens()

    def accumulate(norm: nn.LayerNorm, args: tuple[torch.Tensor, ...]) -> None:
        given = tokens.of(args[0])
        normalised = nn.functional.layer_norm(projection.down(given), (projection.width,), eps=norm.eps).double()
        output = nn.functional.layer_norm(given, norm.normalized_shape, norm.weight, norm.bias, norm.eps)  # not norm():
        target = projection.down(output).double()  # that would call this hook again
        sums[norm] += torch.stack(
            [normalised.sum(0), normalised.square().sum(0), target.sum(0), (normalised * target).sum(0)]
        ).cpu()

    tokens.run(model, batches, [norm.register_forward_pre_hook(accumulate) for norm in norms])
    fits = {}
    for norm, (n, nn_, t, nt) in sums.items():
        n, nn_, t, nt = n / tokens.count, nn_ / tokens.count, t / tokens.count, nt / tokens.count
        weight = (nt - n * t) / (nn_ - n * n).clamp_min(1e-12)
        parameter = norm.weight
        fits[norm] = (weight.to(parameter), (t - weight * n).to(parameter))
    return fits
