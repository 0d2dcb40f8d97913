"""The paper's baselines that only a task model takes: intermediate-task transfer, knowledge distillation (vanilla
and patient) and LayerDrop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from transformers import PreTrainedModel

from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs, bottom_layers
from theseus_pl.app.predecessors.classifier import load_classifier
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.settings import Rule
from theseus_pl.lightning.baselines import (
    LAYERDROP_RULES,
    PATIENT_RULES,
    DistillationModule,
    add_layerdrop,
    remove_layerdrop,
)
from theseus_pl.lightning.distillation import SOFT_TARGET_RULES
from theseus_pl.lightning.modules import FineTuningModule


@dataclass(frozen=True)
class Transfer(CompressionMethod):
    """Intermediate-task transfer (Table 4): a successor compressed on another task (MNLI in the paper),
    fine-tuned on this one with a new head."""

    successor: str  # that run's successor folder

    RULES: ClassVar[dict[str, Rule]] = {
        "successor": Rule(lambda v: isinstance(v, str) and v not in ("", "???"),
                          "the successor folder of another run (<run>/successor)"),
    }  # fmt: skip

    def models_read(self) -> list[tuple[str, str]]:
        return [("method.successor", self.successor)]

    def build(self, inputs: MethodInputs) -> Method:
        student = load_classifier(self.successor, inputs.task, new_head=True)
        return Method(self.name, FineTuningModule(student, inputs.metrics(), **inputs.optimizer), lambda: student)


@dataclass(frozen=True)
class KnowledgeDistillation(CompressionMethod):
    """Baseline vanilla knowledge distillation into the bottom ``n`` layers: ``alpha · KD(T) + (1 - alpha) ·
    task loss``."""

    alpha: float
    temperature: float

    RULES: ClassVar[dict[str, Rule]] = SOFT_TARGET_RULES

    def build(self, inputs: MethodInputs) -> Method:
        return self._distillation(inputs, beta=0.0)

    def _distillation(self, inputs: MethodInputs, beta: float) -> Method:
        student = bottom_layers(inputs.predecessor(), inputs.theseus.successor_layers, inputs.theseus.layers_path)
        module = DistillationModule(
            student, inputs.predecessor(), inputs.metrics(), alpha=self.alpha, temperature=self.temperature,
            beta=beta, **inputs.optimizer,
        )  # fmt: skip
        return Method(self.name, module, lambda: student)


@dataclass(frozen=True)
class PatientDistillation(KnowledgeDistillation):
    """Baseline BERT-PKD (skip): KD plus ``beta ·`` the patient loss on normalised [CLS] states of matched
    layers."""

    beta: float

    RULES: ClassVar[dict[str, Rule]] = PATIENT_RULES

    def build(self, inputs: MethodInputs) -> Method:
        return self._distillation(inputs, beta=self.beta)


@dataclass(frozen=True)
class LayerDrop(CompressionMethod):
    """Baseline LayerDrop: fine-tune the whole predecessor dropping each layer with ``drop_rate`` (None: ``1 -
    n/L``), then keep every other layer (the first of each of ``n`` modules)."""

    drop_rate: float | None

    RULES: ClassVar[dict[str, Rule]] = {
        "drop_rate": Rule(lambda v: v is None or LAYERDROP_RULES["drop_rate"].valid(v),
                          f"null (1 - n/L) or {LAYERDROP_RULES['drop_rate'].expected}"),
    }  # fmt: skip

    def build(self, inputs: MethodInputs) -> Method:
        model, layers, layers_path = inputs.predecessor(), inputs.theseus.successor_layers, inputs.theseus.layers_path
        rate = self.drop_rate
        if rate is None:  # keeping n of L layers: drop each with probability 1 - n/L in training
            rate = 1 - layers / len(find_layer_stack(model, layers_path).layers)
        add_layerdrop(model, rate, layers_path)

        def keep_every_other() -> PreTrainedModel:
            remove_layerdrop(model, layers_path)
            return TheseusModel(model, layers, "every_other", layers_path).to_compact_model()

        return Method(self.name, FineTuningModule(model, inputs.metrics(), **inputs.optimizer), keep_every_other)
