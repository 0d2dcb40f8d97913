"""What is trained to produce the ``n``-layer successor: Theseus, or one of the paper's baselines.

Each method gives the pipeline a LightningModule, the callbacks it needs, and a way to get the compact successor
once training is over; everything around it (predecessor, data, evaluation, export, results) is shared, so every
method writes the same ``results.json``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from transformers import PreTrainedModel

from theseus_pl.app.predecessor import load_classifier
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import SuccessorFactory, TheseusModel
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.core.successors.activity import neuron_activity
from theseus_pl.core.successors.copied import Importance
from theseus_pl.core.successors.hidden_basis import narrow_start
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.baselines import DistillationModule, add_layerdrop, remove_layerdrop
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import FineTuningModule, TheseusModule

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
    bound: Hydra's partial instantiation, so a researcher's factory is configured like any Hydra object. What needs
    the predecessor's response to the ``calibration`` batches is measured here and bound too: ``activity`` for
    ``importance: activation`` (with ``intermediate_size``), and ``narrow_start`` (the shared projections and the
    fitted LayerNorms) for ``hidden_size``."""
    settings = {"_target_": "theseus_pl.core.successors.copied.copied_layer", **settings}
    try:
        factory = instantiate(settings, _partial_=True)
    except InstantiationException as error:
        raise ValueError(
            f"theseus.successor._target_={settings['_target_']!r} cannot be used as a successor factory: {error}"
        ) from error
    by_activity = settings.get("importance") == Importance.ACTIVATION.value and settings.get("intermediate_size")
    hidden_size = settings.get("hidden_size")
    if not by_activity and hidden_size is None:
        return factory
    if predecessor is None or calibration is None:
        raise ValueError(
            "theseus.successor.importance=activation and theseus.successor.hidden_size need training batches to "
            "measure the predecessor on."
        )
    batches, measured = list(calibration()), {}  # measured more than once
    if by_activity:
        measured["activity"] = neuron_activity(predecessor, batches, layers_path)
    if hidden_size is not None:
        measured["narrow_start"] = narrow_start(predecessor, batches, hidden_size, layers_path)
    return functools.partial(factory, **measured)


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
