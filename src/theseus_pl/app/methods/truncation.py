"""The truncation baseline, for every kind of run: the predecessor's ``n`` layers that ``theseus.init`` names, trained
on the run's loss, or with the predecessor's soft targets (knowledge distillation into the same student); and, for a
sentence-embedding model, those layers kept with no training at all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from theseus_pl.app.config.kinds import EMBEDDING_MODEL, LANGUAGE_MODEL, TASK_MODEL
from theseus_pl.app.methods.kind_models import KindModels
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs, SoftTargets, student_module


@dataclass(frozen=True)
class FineTuning(SoftTargets, CompressionMethod):
    """Baseline "Fine-tuning" (``fine_tuning``; ``lm_truncation`` on a language model): the predecessor's bottom
    ``n`` layers with its embeddings and head, trained on the run's loss (:meth:`MethodInputs.truncated` says which
    parameters train). With ``alpha > 0`` the baseline "vanilla KD" (``kd``): ``alpha · KD(T) + (1 - alpha) ·`` the
    run's loss, the soft targets the frozen predecessor's; on a language model its next-token distributions. On a
    sentence-embedding model (``embedding_mse``) the run's loss is already the predecessor's: sentence-transformers'
    recipe, the kept layers trained to the MSE of the predecessor's sentence vectors."""

    kinds: ClassVar[tuple[str, ...]] = (TASK_MODEL, LANGUAGE_MODEL, EMBEDDING_MODEL)

    def start_layers(self, init: str, models: KindModels) -> str | None:
        return models.truncation_keeps(init)

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.truncated(inputs.predecessor())
        return Method(self.name, student_module(inputs, student, self.alpha, self.temperature), lambda: student)


@dataclass(frozen=True)
class KeptLayers(CompressionMethod):
    """The predecessor's ``n`` layers that ``theseus.init`` names, with no training (``embedding_truncation``): what a
    sentence model loses by depth alone, the floor every trained method must clear. Which layers matter: the top ones
    of all-MiniLM-L6-v2 and every other one of all-mpnet-base-v2 kept the most of their STS-B scores here."""

    kinds: ClassVar[tuple[str, ...]] = (EMBEDDING_MODEL,)

    @property
    def trains(self) -> bool:
        return False

    def build(self, inputs: MethodInputs) -> Method:
        student = inputs.truncated(inputs.predecessor())
        return Method(self.name, None, lambda: student)
