"""A successor factory with its settings bound and what they need measured on the predecessor: the library's one
way to build successors, which the app uses too.

Two settings depend on the predecessor's response to real text: keeping the feed-forward neurons that are most
active on it (``intermediate_size`` with ``importance="activation"``, the default) and starting narrower layers
from the principal directions of its hidden states (``hidden_size``). Both are measured here, once, on a few
training batches, before any successor exists.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from transformers import PreTrainedModel

from theseus_pl.core.successors.activity import neuron_activity
from theseus_pl.core.successors.copied import Importance, copied_layer
from theseus_pl.core.successors.hidden_basis import narrow_start
from theseus_pl.core.successors.protocol import SuccessorFactory


def successor_factory(
    model: PreTrainedModel | None = None,
    batches: Iterable[Mapping[str, torch.Tensor]] | None = None,
    *,
    factory: SuccessorFactory = copied_layer,
    layers_path: str | None = None,
    **settings: Any,
) -> SuccessorFactory:
    """``factory`` (default :func:`~theseus_pl.core.successors.copied_layer`) with ``settings`` bound, for
    ``TheseusModel(model, n, factory=...)``.

    ``settings`` are the factory's own keyword arguments; settings given as None are left to the factory's
    defaults. ``intermediate_size=N`` keeps N feed-forward neurons per layer, chosen by ``importance``
    (``"activation"``, ``"magnitude"`` or ``"random"``); ``hidden_size=h`` runs the layers at width ``h``. When
    those need the predecessor measured, ``model`` (the fine-tuned predecessor, before ``TheseusModel`` wraps it)
    is run over ``batches`` (a few training batches: dicts of ``input_ids``, ``attention_mask``, ...; labels are
    ignored), in eval mode and without gradients.
    """
    settings = {name: value for name, value in settings.items() if value is not None}
    if settings.get("intermediate_size") is not None:
        settings["importance"] = _importance(settings.get("importance", Importance.ACTIVATION)).value
    by_activity = settings.get("importance") == Importance.ACTIVATION.value and "intermediate_size" in settings
    hidden_size = settings.get("hidden_size")
    if not by_activity and hidden_size is None:
        return functools.partial(factory, **settings) if settings else factory
    if model is None or batches is None:
        raise ValueError(
            "importance='activation' (the default) with intermediate_size, and hidden_size, are measured on the "
            "predecessor: give model (the fine-tuned predecessor) and batches (a few of its training batches)"
            + (", or importance='magnitude'." if hidden_size is None else ".")
        )
    batches, measured = list(batches), {}  # read more than once
    if by_activity:
        measured["activity"] = neuron_activity(model, batches, layers_path)
    if hidden_size is not None:
        measured["narrow_start"] = narrow_start(model, batches, hidden_size, layers_path)
    return functools.partial(factory, **settings, **measured)


def _importance(value: Importance | str) -> Importance:
    try:
        return Importance(value)
    except ValueError:
        choices = ", ".join(repr(choice.value) for choice in Importance)
        raise ValueError(f"importance={value!r} must be one of {choices}.") from None
