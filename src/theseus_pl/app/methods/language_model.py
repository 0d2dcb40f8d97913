"""The methods that make an ``n``-layer decoder LM from its predecessor: Theseus and the layer-removal baselines.

Every method trains (if it trains) on the language-model loss of the same windows for the same steps, and only
decoder layers: embeddings, final norm and head stay the predecessor's, as Theseus keeps them. Each is one class
and one ``conf/method/<name>.yaml``, built from the config by
:func:`~theseus_pl.app.methods.task_model.method_from_config` like the encoder methods; ``for_decoders`` tells the
run which kind of model it compresses.

- ``lm_theseus``: progressive module replacing (constant rate or curriculum), the LM loss only.
- ``shortgpt``: the layers of least block influence removed, no training (ShortGPT).
- ``shortgpt_healed``: the same removal, then the kept layers trained on the LM loss (healing).
- ``lm_truncation``: the bottom ``n`` layers kept and trained on the LM loss.
- ``streamline``: the contiguous block whose input and output are most alike replaced by one layer trained on the
  block's hidden states (LLM-Streamline).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from theseus_pl.app.methods.task_model import BLOCK_INFLUENCE, CompressionMethod, Method
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import keep_layers, layers_kept_by_influence, most_similar_block
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.lightning.block_replacement import BlockReplacementModule
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.lm_metrics import LanguageModelMetrics
from theseus_pl.lightning.modules import FineTuningModule, TheseusModule


@dataclass(frozen=True)
class LanguageModelInputs:
    """What every decoder method is built from, besides its own settings."""

    predecessor_dir: str
    successor_layers: int
    optimizer: dict[str, Any]  # lr, weight_decay, warmup_ratio
    schedule: ReplacementSchedule
    replacement: str  # the schedule's config name (replacement.kind)
    seed: int
    calibration: Callable[[], Iterable[Mapping[str, torch.Tensor]]]  # training windows for layer choices
    init: str = "bottom"  # theseus.init: the layers Theseus's successors start as (block_influence: ShortGPT's kept)
    layers_path: str | None = None  # theseus.layers_path: the layer list of a decoder family nobody registered

    def predecessor(self) -> PreTrainedModel:
        return AutoModelForCausalLM.from_pretrained(self.predecessor_dir).eval()

    def kept_by_influence(self, predecessor: PreTrainedModel) -> list[int]:
        """The ``successor_layers`` layers ShortGPT keeps, measured on the calibration windows."""
        return layers_kept_by_influence(predecessor, self.calibration(), self.successor_layers, self.layers_path)


@dataclass
class Compaction:
    """A method built for a run without training: the compact model it gives."""

    name: str
    successor: Callable[[], PreTrainedModel]
    module: None = None
    callbacks: tuple[()] = ()
    schedule: None = None


@dataclass(frozen=True)
class DecoderMethod(CompressionMethod):
    """A method for decoder LMs (``build`` takes :class:`LanguageModelInputs`)."""

    for_decoders: ClassVar[bool] = True

    def build(self, inputs: LanguageModelInputs) -> Method | Compaction:  # type: ignore[override]
        raise NotImplementedError


def _layers_only(model: PreTrainedModel, layers_path: str | None) -> PreTrainedModel:
    """Only the decoder layers train: embeddings, final norm and head stay as the predecessor has them."""
    model.requires_grad_(False)
    find_layer_stack(model, layers_path).layers.requires_grad_(True)
    return model


def _fine_tuned(name: str, model: PreTrainedModel, inputs: LanguageModelInputs) -> Method:
    module = FineTuningModule(_layers_only(model, inputs.layers_path), LanguageModelMetrics(), **inputs.optimizer)
    return Method(name=name, module=module, successor=lambda: module.model)


@dataclass(frozen=True)
class LanguageModelTheseus(DecoderMethod):
    replaces_modules: ClassVar[bool] = True
    needs_schedule: ClassVar[bool] = True

    def build(self, inputs: LanguageModelInputs) -> Method:
        predecessor = inputs.predecessor()
        init = inputs.kept_by_influence(predecessor) if inputs.init == BLOCK_INFLUENCE else inputs.init
        theseus = TheseusModel(predecessor, inputs.successor_layers, init, inputs.layers_path)
        module = TheseusModule(theseus, LanguageModelMetrics(), seed=inputs.seed, **inputs.optimizer)
        return Method(
            name=f"{self.name}_{inputs.replacement}", module=module, successor=theseus.to_compact_model,
            callbacks=replacement_callbacks(inputs.schedule), schedule=inputs.schedule,
        )  # fmt: skip


@dataclass(frozen=True)
class ShortGPT(DecoderMethod):
    heal: bool = False  # train the kept layers on the LM loss afterwards

    def build(self, inputs: LanguageModelInputs) -> Method | Compaction:
        predecessor = inputs.predecessor()
        compact = keep_layers(predecessor, inputs.kept_by_influence(predecessor), inputs.layers_path)
        if self.heal:
            return _fine_tuned(self.name, compact, inputs)
        return Compaction(self.name, lambda: compact)


@dataclass(frozen=True)
class LanguageModelTruncation(DecoderMethod):
    def build(self, inputs: LanguageModelInputs) -> Method:
        compact = keep_layers(inputs.predecessor(), list(range(inputs.successor_layers)), inputs.layers_path)
        return _fine_tuned(self.name, compact, inputs)


@dataclass(frozen=True)
class Streamline(DecoderMethod):
    def build(self, inputs: LanguageModelInputs) -> Method:
        predecessor = inputs.predecessor()
        count = len(find_layer_stack(predecessor, inputs.layers_path).layers)
        length = count - inputs.successor_layers + 1  # one layer stands in for the block
        start = most_similar_block(predecessor, inputs.calibration(), length, inputs.layers_path)
        module = BlockReplacementModule(
            predecessor, start, length, LanguageModelMetrics(), **inputs.optimizer, layers_path=inputs.layers_path
        )
        return Method(name=self.name, module=module, successor=lambda: module.model)
