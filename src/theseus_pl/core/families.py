"""What the code knows of each model family, in one registry: where its layer list is, how a layer's feed-forward
network and attention are laid out, and so what a successor may narrow.

Progressive module replacing only needs the list of layers (an ``nn.ModuleList``) that the encoder iterates over;
everything else in the model stays untouched, so any encoder works when the user names the list by its attribute
path. Narrower successors need more: the feed-forward layout (``intermediate_size``) and the attention layout
(``hidden_size``). A family supported out of the box is one :class:`Family` in :data:`FAMILIES`, keyed by
``config.model_type``; :func:`register_family` adds another.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


@dataclass(frozen=True)
class FeedForward:
    """Where a layer keeps its feed-forward network, relative to the layer, and its width in the config."""

    expand: str  # the Linear from the hidden width up to the feed-forward width
    contract: str  # the Linear back down to the hidden width
    width: str  # the config attribute holding the feed-forward width


@dataclass(frozen=True)
class Attention:
    """Where a layer keeps its attention and LayerNorms, and its config's names for width and head count."""

    query: str
    key: str
    value: str
    output: str  # the Linear from the attention's values back to the hidden state
    attention_norm: str  # the LayerNorm after the attention's residual sum
    output_norm: str  # the LayerNorm after the feed-forward network's residual sum
    hidden: str  # the config attribute holding the hidden width
    heads: str  # the config attribute holding the number of attention heads


@dataclass(frozen=True)
class Family:
    """One model family as the code knows it.

    ``layers``: the layer list's path relative to the model's backbone (``model.base_model``). ``feed_forward``:
    its layers' feed-forward layout, None where unknown (no narrower feed-forward successors). ``attention``: its
    layers' attention layout, None where the layers cannot run narrower than the embeddings (``why_not_narrow``
    says why, for the refusal). ``decoder``: a causal language model, whose layers keep a KV cache by index (see
    :mod:`theseus_pl.core.decoders`).
    """

    layers: str
    feed_forward: FeedForward | None = None
    attention: Attention | None = None
    why_not_narrow: str = "its attention layout is not known"
    decoder: bool = False


_BERT_FEED_FORWARD = FeedForward("intermediate.dense", "output.dense", "intermediate_size")
# fmt: off
_BERT_ATTENTION = Attention(
    "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "output.LayerNorm", "hidden_size", "num_attention_heads",
)
_BERT = Family("encoder.layer", _BERT_FEED_FORWARD, _BERT_ATTENTION)
_NOT_NARROWED = "narrower decoder layers are not supported yet"
_DECODER = Family("layers", decoder=True, why_not_narrow=_NOT_NARROWED)
FAMILIES: dict[str, Family] = {
    "bert": _BERT,
    "roberta": _BERT,
    "xlm-roberta": _BERT,
    "electra": _BERT,
    "mpnet": Family("encoder.layer", _BERT_FEED_FORWARD, Attention(
        "attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm",
        "output.LayerNorm", "hidden_size", "num_attention_heads",
    )),
    "deberta-v2": Family(
        "encoder.layer", _BERT_FEED_FORWARD,
        why_not_narrow="DeBERTa's relative position embeddings are read at the full width inside every layer",
    ),
    "distilbert": Family("transformer.layer", FeedForward("ffn.lin1", "ffn.lin2", "hidden_dim"), Attention(
        "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin", "sa_layer_norm",
        "output_layer_norm", "dim", "n_heads",
    )),
    # Decoders: successors are whole copied layers (their gated feed-forward networks are not narrowed yet).
    "llama": _DECODER,
    "qwen2": _DECODER,
    "mistral": _DECODER,
    "gpt2": Family("h", decoder=True, why_not_narrow=_NOT_NARROWED),
}
# fmt: on


def register_family(model_type: str, family: Family) -> None:
    """Teach every lookup (layer list, feed-forward and attention layouts) a family: ``config.model_type`` is
    ``model_type``. Replaces what was known of it."""
    FAMILIES[model_type] = family


def family_of(config: PretrainedConfig) -> Family | None:
    """The registered family of a model's config; None for a model type nobody registered."""
    return FAMILIES.get(getattr(config, "model_type", None))


def feed_forward_of(config: PretrainedConfig) -> FeedForward:
    """The family's feed-forward layout; a ValueError naming the known families for any other."""
    family = family_of(config)
    if family is None or family.feed_forward is None:
        known = sorted(name for name, known in FAMILIES.items() if known.feed_forward)
        raise ValueError(
            f"intermediate_size: the feed-forward network of model type {config.model_type!r} is not known (known: "
            f"{', '.join(known)}). Leave it None, register the family (theseus_pl.register_family), or build "
            "successors with a factory of your own."
        )
    return family.feed_forward


def attention_of(config: PretrainedConfig) -> Attention:
    """The family's attention layout; a ValueError saying why its layers cannot be narrowed for any other."""
    family = family_of(config)
    if family is None or family.attention is None:
        known = sorted(name for name, known in FAMILIES.items() if known.attention)
        reason = family.why_not_narrow if family is not None else "the family is not registered"
        raise ValueError(
            f"hidden_size: the layers of model type {config.model_type!r} cannot be narrowed ({reason}; known: "
            f"{', '.join(known)}). Leave it None."
        )
    return family.attention


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
    ``"bert.encoder.layer"``); without it the path comes from the model's :class:`Family`.
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
    family = family_of(model.config)
    if family is None:
        raise ValueError(
            f"Cannot find the layers of model type {model_type!r} ({type(model).__name__}). "
            f"Known families: {', '.join(sorted(FAMILIES))}. For any other model, name its layer "
            f"list by attribute path from the model, e.g. layers_path='<backbone>.encoder.layer' or "
            f"'model.layers' (print(model) shows it). {_candidates_hint(model)}"
        )
    prefix = model.base_model_prefix
    has_backbone = prefix and getattr(model, prefix, None) is not None
    return f"{prefix}.{family.layers}" if has_backbone else family.layers


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


def shape_of(config: PretrainedConfig) -> dict[str, int | None]:
    """A model's depth and widths, as ``results.json`` reports them (None where the family has no such width); the
    hidden size is the layers' (``narrow_hidden_size`` where successors run narrower than the embeddings)."""
    family = family_of(config)
    width = family.feed_forward.width if family and family.feed_forward else "intermediate_size"
    return {
        "layers": config.num_hidden_layers,
        "hidden_size": getattr(config, "narrow_hidden_size", None) or getattr(config, "hidden_size", None),
        "intermediate_size": getattr(config, width, None),
    }
