"""The paper's baselines that only a task model takes: intermediate-task transfer, patient knowledge distillation
and LayerDrop (vanilla KD is the truncation baseline with soft targets: :mod:`~theseus_pl.app.methods.truncation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from transformers import PreTrainedModel

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.methods.kind_models import KindModels
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs, student_module
from theseus_pl.app.methods.truncation import FineTuning
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.settings import Rule
from theseus_pl.lightning.baselines import (
    LAYERDROP_RULES,
    PATIENT_RULES,
    add_layerdrop,
    remove_layerdrop,
)
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

    def start_layers(self, init: str, models: KindModels) -> str | None:
        return None  # the other run's successor, whole

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.models.with_new_head(self.successor)
        return Method(self.name, FineTuningModule(student, inputs.metrics(), **inputs.optimizer), lambda: student)


@dataclass(frozen=True)
class PatientDistillation(FineTuning):
    """Baseline BERT-PKD (skip): KD into the ``n`` layers ``theseus.init`` names (the bottom ones by default) plus
    ``beta ·`` the patient loss on normalised [CLS] states of matched layers (a task model's: a language model has
    no [CLS] state)."""

    beta: float = 0.0

    RULES: ClassVar[dict[str, Rule]] = {**FineTuning.RULES, **PATIENT_RULES}
    kinds: ClassVar[tuple[str, ...]] = (TASK_MODEL,)

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.truncated(inputs.predecessor())
        module = student_module(inputs, student, self.alpha, self.temperature, self.beta)
        return Method(self.name, module, lambda: student)


@dataclass(frozen=True)
class LayerDrop(CompressionMethod):
    """Baseline LayerDrop: fine-tune the whole predecessor dropping each layer with ``drop_rate`` (None: ``1 -
    n/L``), then keep every other layer (the first of each of ``n`` modules)."""

    drop_rate: float | None

    RULES: ClassVar[dict[str, Rule]] = {
        "drop_rate": Rule(lambda v: v is None or LAYERDROP_RULES["drop_rate"].valid(v),
                          f"null (1 - n/L) or {LAYERDROP_RULES['drop_rate'].expected}"),
    }  # fmt: skip

    def start_layers(self, init: str, models: KindModels) -> str | None:
        return "every_other"  # what it keeps after training, whatever theseus.init says

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
