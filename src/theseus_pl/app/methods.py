"""What is trained to produce the ``n``-layer successor: Theseus, or one of the paper's baselines.

Each method gives the pipeline a LightningModule, the callbacks it needs, and a way to get the compact successor
once training is over; everything around it (predecessor, data, evaluation, export, results) is shared, so every
method writes the same ``results.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.utils import get_method
from transformers import PreTrainedModel

from theseus_pl.app.config_terms import SUCCESSOR_SETTINGS, in_config_terms
from theseus_pl.app.predecessor import load_classifier
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.core.successors import SuccessorFactory
from theseus_pl.core.successors import successor_factory as core_successor_factory
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.baselines import DistillationModule, add_layerdrop, remove_layerdrop
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import FineTuningModule, TheseusModule

DEFAULT_SUCCESSOR = "theseus_pl.core.successors.copied_layer"
METHODS = ("theseus", "fine_tuning", "kd", "pkd", "layerdrop", "transfer")


@dataclass
class Method:
    name: str
    module: pl.LightningModule
    successor: Callable[[], PreTrainedModel]  # the compact model, called after the best weights are loaded
    callbacks: list[pl.Callback] = field(default_factory=list)


def bottom_layers(predecessor: PreTrainedModel, layers: int, layers_path: str | None) -> PreTrainedModel:
    """The predecessor cut to its bottom ``layers`` layers, embeddings and head kept: the baselines' student."""
    return TheseusModel(predecessor, layers, "bottom", layers_path).to_compact_model()


def successor_factory(
    settings: dict[str, Any],
    predecessor: PreTrainedModel | None = None,
    calibration: Callable[[], Iterable[Mapping[str, torch.Tensor]]] | None = None,
    layers_path: str | None = None,
) -> SuccessorFactory:
    """``theseus.successor`` as the factory it names (``_target_``, default the copied layer) with its other keys
    bound by the library's :func:`~theseus_pl.core.successors.successor_factory`, which measures on the
    ``calibration`` batches what the settings need; its errors are reworded with the config's keys."""
    settings = dict(settings)
    target = settings.pop("_target_", DEFAULT_SUCCESSOR)
    try:
        factory = get_method(target)
    except Exception as error:  # whatever importing the named module raises
        raise ValueError(
            f"theseus.successor._target_={target!r} cannot be used as a successor factory: {error}"
        ) from error

    def batches() -> Iterator[Mapping[str, torch.Tensor]]:  # read only if the settings need measuring
        yield from calibration()

    with successor_settings_named_by_config():
        return core_successor_factory(
            predecessor, batches() if calibration else None, factory=factory, layers_path=layers_path, **settings
        )


@contextmanager
def successor_settings_named_by_config() -> Iterator[None]:
    """The library's errors about successor settings, reworded with the ``theseus.successor.*`` keys."""
    try:
        yield
    except ValueError as error:
        raise ValueError(in_config_terms(str(error), "theseus.successor", SUCCESSOR_SETTINGS)) from error


def build_method(
    settings: dict[str, Any],
    predecessor_dir: str,
    task: TaskSpec,
    theseus: dict[str, Any],
    optimizer: dict[str, Any],
    schedule: ReplacementSchedule,
    replacement_kind: str,
    seed: int,
    calibration: Callable[[], Iterable[Mapping[str, torch.Tensor]]] | None = None,
) -> Method:
    """``settings`` is the ``method`` config: ``name`` and that method's own values. ``calibration`` gives a few
    training batches, for successors chosen by their activations (``theseus.successor.importance=activation``)."""
    name = settings["name"]
    if name not in METHODS:
        raise ValueError(f"Unknown method {name!r}; choose one of {', '.join(METHODS)}.")
    metrics = TaskMetrics.for_task(task)
    layers, layers_path = theseus["successor_layers"], theseus.get("layers_path")
    if name == "theseus":
        predecessor = load_classifier(predecessor_dir, task)
        factory = successor_factory(theseus.get("successor") or {}, predecessor, calibration, layers_path)
        with successor_settings_named_by_config():
            model = TheseusModel(predecessor, layers, theseus["init"], layers_path, factory)
        switch = schedule.switch_step
        module = TheseusModule(
            model, metrics, seed=seed, **optimizer,
            shared_trainable_from=switch if theseus["finetune_shared"] else None,
            lr_restart_step=switch if theseus["lr_schedule"] == "per_phase" else None,
        )  # fmt: skip
        return Method(f"theseus_{replacement_kind}", module, model.to_compact_model, replacement_callbacks(schedule))
    if name == "fine_tuning":
        student = bottom_layers(load_classifier(predecessor_dir, task), layers, layers_path)
        return Method(name, FineTuningModule(student, metrics, **optimizer), lambda: student)
    if name == "transfer":
        # Intermediate-task transfer (Table 4): a successor compressed on another task (MNLI in the paper),
        # fine-tuned here with a new head.
        student = load_classifier(settings["successor"], task, new_head=True)
        return Method(name, FineTuningModule(student, metrics, **optimizer), lambda: student)
    if name in ("kd", "pkd"):
        student = bottom_layers(load_classifier(predecessor_dir, task), layers, layers_path)
        teacher = load_classifier(predecessor_dir, task)
        beta = settings["beta"] if name == "pkd" else 0.0
        module = DistillationModule(
            student, teacher, metrics, alpha=settings["alpha"], temperature=settings["temperature"], beta=beta,
            **optimizer,
        )  # fmt: skip
        return Method(name, module, lambda: student)
    model = load_classifier(predecessor_dir, task)
    rate = settings.get("drop_rate")
    if rate is None:  # keeping n of L layers: drop each with probability 1 - n/L in training
        rate = 1 - layers / len(find_layer_stack(model, layers_path).layers)
    add_layerdrop(model, rate, layers_path)

    def keep_every_other() -> PreTrainedModel:
        remove_layerdrop(model, layers_path)
        return TheseusModel(model, layers, "every_other", layers_path).to_compact_model()

    return Method(name, FineTuningModule(model, metrics, **optimizer), keep_every_other)
