"""The layer-removal methods that only a language model takes: ShortGPT (healed or not) and LLM-Streamline.

Theseus (``method=lm_theseus`` or ``theseus``) and the truncation baseline (``lm_truncation``) serve both kinds of
run (:mod:`~theseus_pl.app.methods.theseus`, :mod:`~theseus_pl.app.methods.truncation`). Every decoder method trains
(if it trains) on the language-model loss of the same windows for the same steps, and only decoder layers:
embeddings, final norm and head stay the predecessor's, as Theseus keeps them.

- ``shortgpt``: the layers of least block influence removed, no training (ShortGPT).
- ``shortgpt_healed``: the same removal, then the kept layers trained on the LM loss (healing).
- ``streamline``: the contiguous block whose input and output are most alike replaced by one layer trained on the
  block's hidden states (LLM-Streamline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from theseus_pl.app.config.kinds import LANGUAGE_MODEL
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs, layers_only
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import keep_layers, most_similar_block
from theseus_pl.lightning.block_replacement import BlockReplacementModule
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.modules import FineTuningModule


@dataclass(frozen=True)
class ShortGPT(CompressionMethod):
    heal: bool = False  # train the kept layers on the LM loss afterwards

    kinds: ClassVar[tuple[str, ...]] = (LANGUAGE_MODEL,)

    @property
    def trains(self) -> bool:
        return self.heal

    def build(self, inputs: MethodInputs) -> Method:
        predecessor = inputs.predecessor()
        compact = keep_layers(predecessor, inputs.kept_by_influence(predecessor), inputs.layers_path)
        if not self.heal:
            return Method(self.name, None, lambda: compact)
        module = FineTuningModule(layers_only(compact, inputs.layers_path), inputs.metrics(), **inputs.optimizer)
        return Method(self.name, module, lambda: module.model)


@dataclass(frozen=True)
class Streamline(CompressionMethod):
    kinds: ClassVar[tuple[str, ...]] = (LANGUAGE_MODEL,)

    def build(self, inputs: MethodInputs) -> Method:
        predecessor = inputs.predecessor()
        count = len(find_layer_stack(predecessor, inputs.layers_path).layers)
        length = count - inputs.theseus.successor_layers + 1  # one layer stands in for the block
        calibration = inputs.calibration() if inputs.calibration else []
        start = most_similar_block(predecessor, calibration, length, inputs.layers_path)
        module = BlockReplacementModule(
            predecessor, start, length, LanguageModelMetrics(), **inputs.optimizer, layers_path=inputs.layers_path
        )
        return Method(self.name, module, lambda: module.model)
