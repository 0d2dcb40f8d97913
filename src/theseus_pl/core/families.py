"""Find the stack of encoder layers inside a Hugging Face model.

Progressive module replacing only needs the list of layers (an ``nn.ModuleList``) that the encoder iterates
over; everything else in the model stays untouched. Known families are looked up by ``config.model_type``;
any other encoder works when the user names the list by its attribute path.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from transformers import PreTrainedModel

# Path of the layer list relative to the model's backbone (``model.base_model``), per ``config.model_type``.
KNOWN_LAYER_PATHS: dict[str, str] = {
    "bert": "encoder.layer",
    "roberta": "encoder.layer",
    "xlm-roberta": "encoder.layer",
    "electra": "encoder.layer",
    "mpnet": "encoder.layer",
    "deberta-v2": "encoder.layer",
    "distilbert": "transformer.layer",
}


@dataclass(frozen=True)
class LayerStack:
    """Where a model keeps its encoder layers: ``getattr(parent, attribute)`` is the list at ``path``."""

    parent: nn.Module
    attribute: str
    path: str

    @property
    def layers(self) -> nn.ModuleList:
        return getattr(self.parent, self.attribute)


def find_layer_stack(model: PreTrainedModel, layers_path: str | None = None) -> LayerStack:
    """Locate the encoder's layer list.

    ``layers_path`` is a dotted attribute path from ``model`` (as ``print(model)`` shows it, e.g.
    ``"bert.encoder.layer"``); without it the path comes from :data:`KNOWN_LAYER_PATHS`.
    """
    if layers_path is None:
        layers_path = _known_path(model)
    *parent_names, attribute = layers_path.split(".")
    parent: nn.Module = model
    for name in parent_names:
        parent = getattr(parent, name, None)
        if parent is None:
            raise ValueError(
                f"layers_path={layers_path!r}: {type(model).__name__} has no attribute path {name!r}. "
                f"{_candidates_hint(model)}"
            )
    layers = getattr(parent, attribute, None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise ValueError(
            f"layers_path={layers_path!r} does not name a non-empty nn.ModuleList in {type(model).__name__}. "
            f"{_candidates_hint(model)}"
        )
    return LayerStack(parent=parent, attribute=attribute, path=layers_path)


def _known_path(model: PreTrainedModel) -> str:
    model_type = getattr(model.config, "model_type", None)
    relative = KNOWN_LAYER_PATHS.get(model_type)
    if relative is None:
        raise ValueError(
            f"Cannot find the encoder layers of model type {model_type!r} ({type(model).__name__}). "
            f"Known families: {', '.join(sorted(KNOWN_LAYER_PATHS))}. For any other encoder, name its layer "
            f"list by attribute path from the model, e.g. layers_path='<backbone>.encoder.layer' "
            f"(print(model) shows it). {_candidates_hint(model)}"
        )
    prefix = model.base_model_prefix
    has_backbone = prefix and getattr(model, prefix, None) is not None
    return f"{prefix}.{relative}" if has_backbone else relative


def _candidates_hint(model: nn.Module) -> str:
    """Name the ModuleLists that look like a layer stack, so the user can pick one."""
    depth = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    candidates = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.ModuleList) and (depth is None or len(module) == depth)
    ]
    if not candidates:
        return "No nn.ModuleList of that depth was found in the model."
    return f"Candidates in this model: {', '.join(candidates)}."
