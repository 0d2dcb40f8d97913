"""The layer-removal methods that only a language model takes: ShortGPT (healed or not) and LLM-Streamline.

Theseus (``method=lm_theseus`` or ``theseus``) and the truncation baseline (``lm_truncation``) serve every kind of
run (:mod:`~theseus_pl.app.methods.theseus`, :mod:`~theseus_pl.app.methods.truncation`). Every decoder method trains
(if it trains) on the same windows for the same steps, on the language-model loss unless ``method.alpha`` weighs the
predecessor's soft targets in, and only decoder layers: embeddings, final norm and head stay the predecessor's, as
Theseus keeps them.

- ``shortgpt``: the layers of least block influence removed, no training (ShortGPT).
- ``shortgpt_healed``: the same removal, then the kept layers trained (healing): on the LM loss, or with
  ``method.alpha`` on the predecessor's next-token distributions.
- ``streamline``: the contiguous block whose input and output are most alike replaced by one layer trained on the
  block's hidden states (LLM-Streamline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from theseus_pl.app.config.kinds import LANGUAGE_MODEL
from theseus_pl.app.methods.kind_models import KindModels, layers_only
from theseus_pl.app.methods.method import (
    BLOCK_INFLUENCE,
    CompressionMethod,
    Method,
    MethodInputs,
    SoftTargets,
    student_module,
)
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import keep_layers, most_similar_block
from theseus_pl.core.settings import Rule, SettingsError, boolean
from theseus_pl.lightning.block_replacement import BlockReplacementModule
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics


@dataclass(frozen=True)
class ShortGPT(SoftTargets, CompressionMethod):
    """ShortGPT's removal of the layers of least block influence; healed (``heal``) by training the kept layers on
    the LM loss, on the KL to the predecessor's next-token distributions at ``temperature`` (``alpha = 1``: what
    NVIDIA's Minitron heals with), or a mix (``alpha · KL + (1 - alpha) · LM loss``)."""

    heal: bool = False  # train the kept layers afterwards

    RULES: ClassVar[dict[str, Rule]] = {**SoftTargets.RULES, "heal": Rule(boolean, "true or false")}
    kinds: ClassVar[tuple[str, ...]] = (LANGUAGE_MODEL,)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.alpha > 0 and not self.heal:
            raise SettingsError({"alpha": (
                f"alpha={self.alpha} weighs soft targets in the healing, but heal=false: nothing trains "
                "(set heal=true, or alpha=0)."
            )})  # fmt: skip

    @property
    def trains(self) -> bool:
        return self.heal

    def start_layers(self, init: str, models: KindModels) -> str | None:
        return BLOCK_INFLUENCE  # it keeps the layers of most block influence, whatever theseus.init says

    def build(self, inputs: MethodInputs) -> Method:
        predecessor = inputs.predecessor()
        compact = keep_layers(predecessor, inputs.kept_by_influence(predecessor), inputs.layers_path)
        if not self.heal:
            return Method(self.name, None, lambda: compact)
        student = layers_only(compact, inputs.layers_path)
        return Method(self.name, student_module(inputs, student, self.alpha, self.temperature), lambda: student)


@dataclass(frozen=True)
class Streamline(CompressionMethod):
    kinds: ClassVar[tuple[str, ...]] = (LANGUAGE_MODEL,)

    def start_layers(self, init: str, models: KindModels) -> str | None:
        return None  # every layer but the most similar block, which one new layer stands in for

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
