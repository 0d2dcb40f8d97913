"""The truncation baseline, for both kinds of run: the predecessor's bottom ``n`` layers, trained."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from theseus_pl.app.config.kinds import LANGUAGE_MODEL, TASK_MODEL
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs
from theseus_pl.lightning.modules import FineTuningModule


@dataclass(frozen=True)
class FineTuning(CompressionMethod):
    """Baseline "Fine-tuning" (``fine_tuning``; ``lm_truncation`` on a language model): the predecessor's bottom
    ``n`` layers with its embeddings and head, trained on the run's loss (:meth:`MethodInputs.truncated` says which
    parameters train)."""

    kinds: ClassVar[tuple[str, ...]] = (TASK_MODEL, LANGUAGE_MODEL)

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.truncated(inputs.predecessor())
        return Method(self.name, FineTuningModule(student, inputs.metrics(), **inputs.optimizer), lambda: student)
