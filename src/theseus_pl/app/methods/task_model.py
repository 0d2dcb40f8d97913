"""What is trained to produce the ``n``-layer successor: Theseus, or one of the paper's baselines.

A method is one class: a frozen dataclass of its own settings (the keys of its ``conf/method/<name>.yaml``), which
names it by ``_target_``; ``method=<name>`` picks it, so a new method is one class (anywhere importable) and one
config file, and nothing else lists the methods. Its settings check themselves when it is built from the config
(:func:`method_from_config`), and what the checks before a run ask of a method are its class attributes: does it
replace predecessor modules (Theseus: single-module scores), take the ``theseus.successor.*`` settings, need the
replacement schedule, read other models. :meth:`CompressionMethod.build` gives the pipeline a LightningModule, the
callbacks it needs, and a way to get the compact successor once training is over; everything around it
(predecessor, data, evaluation, export, results) is shared, so every method writes the same ``results.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import lightning.pytorch as pl
import torch
from hydra.utils import get_class, get_method
from transformers import PreTrainedModel

from theseus_pl.app.config.terms import SUCCESSOR_SETTINGS, in_config_terms
from theseus_pl.app.predecessors.classifier import load_classifier
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import SuccessorInit, TheseusModel
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.core.settings import (
    Rule,
    SettingsError,
    boolean,
    check_fields,
    one_of,
    optional_positive_int,
    positive_int,
)
from theseus_pl.core.successors import Importance, SuccessorFactory
from theseus_pl.core.successors import successor_factory as core_successor_factory
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.baselines import (
    LAYERDROP_RULES,
    PATIENT_RULES,
    DistillationModule,
    add_layerdrop,
    remove_layerdrop,
)
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.distillation import SOFT_TARGET_RULES
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import FineTuningModule, TheseusModule

DEFAULT_SUCCESSOR = "theseus_pl.core.successors.copied_layer"
LR_SCHEDULES = ("one_decay", "per_phase")  # see conf/theseus/default.yaml


def importable(value: Any) -> bool:
    """A dotted path Hydra can resolve to a callable (it imports the module)."""
    try:
        return isinstance(value, str) and callable(get_method(value))
    except Exception:  # whatever importing the named module raises
        return False


# theseus.init: the core's choices within an even split, and one measured on data (decoder LMs only).
BLOCK_INFLUENCE = "block_influence"
INITS = (*(init.value for init in SuccessorInit), BLOCK_INFLUENCE)


@dataclass(frozen=True)
class TheseusSettings:
    """The ``theseus`` group: the successor's depth and the layers it starts from (every method's student), and
    how Theseus builds its successor modules (``successor``: the factory's ``_target_`` and its settings) and trains
    them. Checked when built; a :class:`~theseus_pl.core.settings.SettingsError` names each field
    (``successor.intermediate_size``) for the app to name as ``theseus.*``."""

    successor_layers: int
    init: str = SuccessorInit.BOTTOM.value
    layers_path: str | None = None
    successor: Mapping[str, Any] = field(default_factory=dict)
    finetune_shared: bool = False
    lr_schedule: str = LR_SCHEDULES[0]

    RULES: ClassVar[dict[str, Rule]] = {
        "successor_layers": Rule(positive_int, "a whole number of layers, at least 1"),
        "init": Rule(one_of(INITS), "one of " + ", ".join(INITS)),
        "finetune_shared": Rule(boolean, "true or false"),
        "lr_schedule": Rule(one_of(LR_SCHEDULES), "one of " + ", ".join(LR_SCHEDULES)),
        "successor._target_": Rule(importable, "the dotted path of an importable successor factory"),
        "successor.intermediate_size": Rule(optional_positive_int, "null (the predecessor's) or a whole number of "
                                            "feed-forward neurons, at least 1"),
        "successor.hidden_size": Rule(optional_positive_int, "null (the predecessor's) or a whole number of hidden "
                                      "dimensions, at least 1"),
        "successor.importance": Rule(one_of(i.value for i in Importance),
                                     "one of " + ", ".join(i.value for i in Importance)),
    }  # fmt: skip

    def __post_init__(self) -> None:
        successor = {f"successor.{key}": value for key, value in (self.successor or {}).items()}
        check_fields({**vars(self), **successor}, self.RULES)

    @property
    def widths(self) -> dict[str, int]:
        """The narrower widths the successor settings ask for (``intermediate_size``, ``hidden_size``), if any."""
        names = ("intermediate_size", "hidden_size")
        successor = self.successor or {}
        return {name: successor[name] for name in names if successor.get(name) is not None}


@dataclass
class Method:
    """A method built for a run: what the Trainer fits, and the compact successor once it has."""

    name: str  # results.json's method: the config's method.name, and the schedule for Theseus (theseus_curriculum)
    module: pl.LightningModule
    successor: Callable[[], PreTrainedModel]  # the compact model, called after the best weights are loaded
    callbacks: list[pl.Callback] = field(default_factory=list)
    schedule: ReplacementSchedule | None = None  # the replacement schedule it trains by, if any


@dataclass(frozen=True)
class MethodInputs:
    """What every method is built from, besides its own settings."""

    predecessor_dir: str  # the fine-tuned predecessor
    task: TaskSpec
    theseus: TheseusSettings
    optimizer: dict[str, Any]  # the optimizer group, resolved: the LightningModule's lr, weight_decay, warmup_ratio
    schedule: ReplacementSchedule
    replacement: str  # the schedule's config name (replacement.kind)
    seed: int
    calibration: Callable[[], Iterable[Mapping[str, torch.Tensor]]] | None = None  # a few training batches

    def metrics(self) -> TaskMetrics:
        return TaskMetrics.for_task(self.task)

    def predecessor(self) -> PreTrainedModel:
        return load_classifier(self.predecessor_dir, self.task)


@dataclass(frozen=True)
class CompressionMethod:
    """A way to train the successor: its settings are the method group's keys (``name`` is what results call
    it); :meth:`build` makes what the Trainer fits. Subclasses state their settings' rules in ``RULES`` (by field
    name: the app names them ``method.<field>``)."""

    name: str

    RULES: ClassVar[dict[str, Rule]] = {}
    replaces_modules: ClassVar[bool] = False  # trains successor modules in place of the predecessor's (Theseus)
    takes_successor_settings: ClassVar[bool] = False  # builds successors by theseus.successor.* (widths, factory)
    needs_schedule: ClassVar[bool] = False  # trains by the replacement schedule: its phase 2 must fit in the run

    def __post_init__(self) -> None:
        rules = {"name": Rule(lambda v: isinstance(v, str) and v != "", "the method's name, as results call it")}
        check_fields(vars(self), {**rules, **self.RULES})

    def models_read(self) -> list[tuple[str, str]]:
        """(config key, folder or hub id) of each model this method reads besides the predecessor."""
        return []

    def build(self, inputs: MethodInputs) -> Method:
        raise NotImplementedError


def method_from_config(settings: Mapping[str, Any]) -> CompressionMethod:
    """The method the ``method`` group names by ``_target_``, built from the group's other keys (resolved): a
    :class:`~theseus_pl.core.settings.SettingsError` names its fields, a TypeError an unknown or missing key."""
    settings = dict(settings)
    target = settings.pop("_target_", None)
    try:
        cls = get_class(target) if isinstance(target, str) else None
    except Exception:  # whatever importing the named module raises
        cls = None
    if cls is None or not issubclass(cls, CompressionMethod):
        raise SettingsError({"_target_": (
            f"_target_={target!r} must be the dotted path of a method class (a CompressionMethod of "
            "theseus_pl.app.methods.task_model): pick a method with method=NAME."
        )})  # fmt: skip
    return cls(**settings)


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


@dataclass(frozen=True)
class Theseus(CompressionMethod):
    """Progressive module replacing (the paper's method): each predecessor module is replaced by its successor
    module with the schedule's rate, then the successor is fine-tuned alone."""

    replaces_modules: ClassVar[bool] = True
    takes_successor_settings: ClassVar[bool] = True
    needs_schedule: ClassVar[bool] = True

    def build(self, inputs: MethodInputs) -> Method:
        predecessor, settings, schedule = inputs.predecessor(), inputs.theseus, inputs.schedule
        factory = successor_factory(settings.successor or {}, predecessor, inputs.calibration, settings.layers_path)
        with successor_settings_named_by_config():
            model = TheseusModel(predecessor, settings.successor_layers, settings.init, settings.layers_path, factory)
        switch = schedule.switch_step
        module = TheseusModule(
            model, inputs.metrics(), seed=inputs.seed, **inputs.optimizer, **self.soft_targets(),
            shared_trainable_from=switch if settings.finetune_shared else None,
            lr_restart_step=switch if settings.lr_schedule == "per_phase" else None,
        )  # fmt: skip
        name = f"{self.name}_{inputs.replacement}"
        return Method(name, module, model.to_compact_model, replacement_callbacks(schedule), schedule)

    def soft_targets(self) -> dict[str, float]:
        """How much the predecessor's soft targets weigh in the loss (the paper's Theseus: not at all)."""
        return {}


@dataclass(frozen=True)
class TheseusDistillation(Theseus):
    """Theseus with its predecessor's logits (beyond the paper): ``alpha · KD(T) + (1 - alpha) · task loss`` on
    the mixed model, the soft targets computed once per training row by the frozen predecessor inside it."""

    alpha: float
    temperature: float

    RULES: ClassVar[dict[str, Rule]] = SOFT_TARGET_RULES

    def soft_targets(self) -> dict[str, float]:
        return {"alpha": self.alpha, "temperature": self.temperature}


@dataclass(frozen=True)
class FineTuning(CompressionMethod):
    """Baseline "Fine-tuning": the predecessor's bottom ``n`` layers (with its embeddings and head), every
    parameter trained."""

    def build(self, inputs: MethodInputs) -> Method:
        student = bottom_layers(inputs.predecessor(), inputs.theseus.successor_layers, inputs.theseus.layers_path)
        return Method(self.name, FineTuningModule(student, inputs.metrics(), **inputs.optimizer), lambda: student)


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
