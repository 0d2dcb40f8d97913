"""The truncation baseline, for both kinds of run: the predecessor's bottom ``n`` layers, trained on the run's loss,
or with the predecessor's soft targets (knowledge distillation into the same student)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from theseus_pl.app.config.kinds import LANGUAGE_MODEL, TASK_MODEL
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs, SoftTargets, student_module


@dataclass(frozen=True)
class FineTuning(SoftTargets, CompressionMethod):
    """Baseline "Fine-tuning" (``fine_tuning``; ``lm_truncation`` on a language model): the predecessor's bottom
    ``n`` layers with its embeddings and head, trained on the run's loss (:meth:`MethodInputs.truncated` says which
    parameters train). With ``alpha > 0`` the baseline "vanilla KD" (``kd``): ``alpha · KD(T) + (1 - alpha) ·`` the
    run's loss, the soft targets the frozen predecessor's; on a language model its next-token distributions."""

    kinds: ClassVar[tuple[str, ...]] = (TASK_MODEL, LANGUAGE_MODEL)

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.truncated(inputs.predecessor())
        return Method(self.name, student_module(inputs, student, self.alpha, self.temperature), lambda: student)
