"""Progressive module replacing, the paper's method, for every kind of run, with or without its predecessor's soft
targets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from theseus_pl.app.config.kinds import EMBEDDING_MODEL, LANGUAGE_MODEL, TASK_MODEL
from theseus_pl.app.methods.method import (
    CompressionMethod,
    Method,
    MethodInputs,
    SoftTargets,
    successor_factory,
    successor_settings_named_by_config,
)
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.modules import TheseusModule


@dataclass(frozen=True)
class Theseus(SoftTargets, CompressionMethod):
    """Progressive module replacing (the paper's method): each predecessor module is replaced by its successor
    module with the schedule's rate, then the successor is fine-tuned alone.

    ``alpha > 0`` goes beyond the paper (which calls Theseus orthogonal to KD; ``theseus_kd``): ``alpha · KD(T) +
    (1 - alpha) ·`` the run's loss on the mixed model, the soft targets the frozen predecessor's inside it (its
    all-predecessor path), computed once per training row of a task, once per batch of a language model; with
    ``teacher=adapted`` (decoder LMs) those of the predecessor adapted to the training text, a model of its own."""

    kinds: ClassVar[tuple[str, ...]] = (TASK_MODEL, LANGUAGE_MODEL, EMBEDDING_MODEL)
    replaces_modules: ClassVar[bool] = True
    takes_successor_settings: ClassVar[bool] = True
    needs_schedule: ClassVar[bool] = True

    def build(self, inputs: MethodInputs) -> Method:
        predecessor, settings, schedule = inputs.predecessor(), inputs.theseus, inputs.schedule
        sources = inputs.successor_sources(predecessor)
        factory = successor_factory(settings.successor or {}, predecessor, inputs.calibration, settings.layers_path)
        with successor_settings_named_by_config():
            model = inputs.replaceable(predecessor, sources, factory)
        switch = schedule.switch_step
        module = TheseusModule(
            model, inputs.metrics(), seed=inputs.seed, **inputs.optimizer, alpha=self.alpha,
            temperature=self.temperature, teacher=inputs.teacher() if self.adapted_teacher else None,
            shared_trainable_from=switch if settings.finetune_shared else None,
            lr_restart_step=switch if settings.lr_schedule == "per_phase" else None,
        )  # fmt: skip
        name = f"{self.name}_{inputs.replacement}"
        return Method(name, module, model.to_compact_model, replacement_callbacks(schedule), schedule)
