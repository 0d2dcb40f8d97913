"""What a compression method is, and what it is built from, for every kind of run.

A method is one class: a frozen dataclass of its own settings (the keys of its ``conf/method/<name>.yaml``), which
names it by ``_target_``; ``method=<name>`` picks it, so a new method is one class (anywhere importable) and one
config file, and nothing else lists the methods. Its settings check themselves when it is built from the config
(:func:`method_from_config`), and what the checks before a run ask of a method are its class attributes: the kinds
of run it compresses, does it replace predecessor modules (Theseus: single-module scores), take the
``theseus.successor.*`` settings, need the replacement schedule, read other models. :meth:`CompressionMethod.build`
gives the run a LightningModule (none for a method that does not train), the callbacks it needs, and a way to get the
compact successor once training is over; everything around it (predecessor, data, evaluation, export, results) is
the run's, so every method of a kind writes the same ``results.json``.

The kind of run reaches a method through its :class:`MethodInputs`: a task model's inputs name its task (the head,
the loss and the metrics), a language model's none; the same Theseus and the same truncation baseline serve both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import lightning.pytorch as pl
import torch
from hydra.utils import get_class, get_method
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.config.terms import SUCCESSOR_SETTINGS, in_config_terms
from theseus_pl.app.methods.kind_models import KindModels
from theseus_pl.core.decoders import load_causal_lm
from theseus_pl.core.layer_removal import layers_kept_by_influence
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
from theseus_pl.lightning.baselines import DistillationModule
from theseus_pl.lightning.distillation import SOFT_TARGET_RULES
from theseus_pl.lightning.embedding_metrics import EmbeddingMetrics, PairScoreMetrics
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import FineTuningModule

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
    module: pl.LightningModule | None  # what the Trainer fits; None for a method that does not train (ShortGPT)
    successor: Callable[[], PreTrainedModel]  # the compact model, called after the best weights are loaded
    callbacks: list[pl.Callback] = field(default_factory=list)
    schedule: ReplacementSchedule | None = None  # the replacement schedule it trains by, if any


@dataclass(frozen=True)
class MethodInputs:
    """What every method is built from, besides its own settings; ``models`` is the run's kind's part (how its
    predecessor loads and scores, how Theseus and the truncation baselines take it apart), so that no method asks
    which kind of run it compresses."""

    predecessor_dir: str  # the model compressed: a fine-tuned classifier, a causal LM, a sentence-transformers model
    models: KindModels
    theseus: TheseusSettings
    optimizer: dict[str, Any]  # the optimizer group, resolved: the LightningModule's lr, weight_decay, warmup_ratio
    schedule: ReplacementSchedule
    replacement: str  # the schedule's config name (replacement.kind)
    seed: int
    calibration: Callable[[], Iterable[Mapping[str, torch.Tensor]]] | None = None  # a few training batches
    adapted_dir: str | None = None  # a decoder LM's predecessor adapted to the training text (method.teacher=adapted)

    def metrics(self) -> TaskMetrics | LanguageModelMetrics | EmbeddingMetrics | PairScoreMetrics:
        return self.models.metrics()

    def predecessor(self) -> PreTrainedModel:
        """The model whose layers are compressed: the classifier, the causal LM, or the sentence model's encoder."""
        return self.models.predecessor(self.predecessor_dir)

    def replaceable(
        self, predecessor: PreTrainedModel, sources: str | list[int], factory: SuccessorFactory
    ) -> TheseusModel:
        """Theseus's model of ``predecessor``: its layers split into modules, each with its successor; a sentence
        model's gives its sentence vectors and their MSE to the teacher's."""
        settings = self.theseus
        return self.models.replaceable(predecessor, settings.successor_layers, sources, settings.layers_path, factory)

    def teacher(self) -> PreTrainedModel:
        """The soft targets' source: the predecessor adapted to the training text where the run made one, else the
        predecessor, loaded once more."""
        if self.adapted_dir is not None:
            return load_causal_lm(self.adapted_dir).eval()
        return self.predecessor()

    def kept_by_influence(self, predecessor: PreTrainedModel) -> list[int]:
        """The ``successor_layers`` layers ShortGPT keeps, measured on the calibration batches."""
        calibration = self.calibration() if self.calibration else []
        return layers_kept_by_influence(predecessor, calibration, self.theseus.successor_layers, self.layers_path)

    def successor_sources(self, predecessor: PreTrainedModel) -> str | list[int]:
        """Where Theseus's successors start: ``theseus.init``, or for ``block_influence`` the layers ShortGPT keeps."""
        init = self.theseus.init
        return self.kept_by_influence(predecessor) if init == BLOCK_INFLUENCE else init

    def truncated(self, predecessor: PreTrainedModel) -> nn.Module:
        """The predecessor's ``successor_layers`` layers that ``theseus.init`` names (bottom: the paper's;
        every_other: Sajjad et al.'s stronger start; top), with its embeddings and head: the truncation baseline's
        student, as the run's kind trains it (:meth:`KindModels.truncated`)."""
        settings = self.theseus
        return self.models.truncated(predecessor, settings.successor_layers, settings.init, settings.layers_path)

    @property
    def layers_path(self) -> str | None:
        return self.theseus.layers_path


@dataclass(frozen=True)
class CompressionMethod:
    """A way to train the successor: its settings are the method group's keys (``name`` is what results call
    it); :meth:`build` makes what the Trainer fits. Subclasses state their settings' rules in ``RULES`` (by field
    name: the app names them ``method.<field>``)."""

    name: str
    # The kinds of run this named method is for, where its config narrows its class's: lm_truncation is the class of
    # fine_tuning under the name the decoder results use, and on a task model would record a method it is not.
    # Empty: every kind its class compresses.
    for_kinds: tuple[str, ...] = field(default=(), kw_only=True)

    RULES: ClassVar[dict[str, Rule]] = {}
    kinds: ClassVar[tuple[str, ...]] = (TASK_MODEL,)  # the kinds of run its class compresses
    replaces_modules: ClassVar[bool] = False  # trains successor modules in place of the predecessor's (Theseus)
    takes_successor_settings: ClassVar[bool] = False  # builds successors by theseus.successor.* (widths, factory)
    needs_schedule: ClassVar[bool] = False  # trains by the replacement schedule: its phase 2 must fit in the run

    def __post_init__(self) -> None:
        rules = {
            "name": Rule(lambda v: isinstance(v, str) and v != "", "the method's name, as results call it"),
            "for_kinds": Rule(lambda v: isinstance(v, tuple) and set(v) <= set(self.kinds),
                              f"a list of the kinds its class compresses ({', '.join(self.kinds)})"),
        }  # fmt: skip
        check_fields(vars(self), {**rules, **self.RULES})

    @property
    def compresses(self) -> tuple[str, ...]:
        """The kinds of run this method compresses: its class's, narrowed to ``for_kinds`` where given."""
        return self.for_kinds or self.kinds

    @property
    def trains(self) -> bool:
        """Whether the method trains anything (ShortGPT's removal alone does not)."""
        return True

    def models_read(self) -> list[tuple[str, str]]:
        """(config key, folder or hub id) of each model this method reads besides the predecessor."""
        return []

    def start_layers(self, init: str, models: KindModels) -> str | None:
        """The predecessor layers the successor starts as, in ``theseus.init``'s words, as a run records it (its kind's
        ``models`` say what their truncation keeps): ``init`` where the method reads it, what it keeps instead where
        it does not (a record copying the setting called LayerDrop's every-other runs bottom, top and every_other),
        None where no such choice is made."""
        return init

    def build(self, inputs: MethodInputs) -> Method:
        raise NotImplementedError


# method.teacher: whose soft targets a distilling method learns from. "adapted" (decoder LMs): the predecessor
# fine-tuned on the run's training text first (finetune.steps), Minitron's "teacher correction".
PREDECESSOR_TEACHER, ADAPTED_TEACHER = "predecessor", "adapted"
TEACHERS = (PREDECESSOR_TEACHER, ADAPTED_TEACHER)


@dataclass(frozen=True)
class SoftTargets:
    """The settings of a method that can learn from soft targets (truncation and KD, ShortGPT's healing, Theseus):
    ``alpha ·`` the KL to the ``teacher``'s at ``temperature`` ``+ (1 - alpha) ·`` the run's loss; ``alpha = 0`` is
    the run's loss alone. Listed first among a method's bases, so that its fields, which have defaults, follow
    ``name``."""

    alpha: float = 0.0
    temperature: float = 1.0
    teacher: str = PREDECESSOR_TEACHER

    RULES: ClassVar[dict[str, Rule]] = {
        **SOFT_TARGET_RULES, "teacher": Rule(one_of(TEACHERS), "one of " + ", ".join(TEACHERS)),
    }  # fmt: skip

    @property
    def adapted_teacher(self) -> bool:
        """Whether the soft targets come from the predecessor adapted to the training text."""
        return self.alpha > 0 and self.teacher == ADAPTED_TEACHER

    def loss_in_words(self, run_loss: str = "the run's loss") -> str:
        """What the method trains on, for ``--check``'s plan; ``run_loss``: the kind's own loss in words."""
        if self.alpha == 0:
            return f"{run_loss} (no soft targets)"
        share = "" if self.alpha == 1 else f" + {1 - self.alpha:g} x {run_loss}"
        whose = "the predecessor adapted to the text" if self.adapted_teacher else "the predecessor"
        return f"{self.alpha:g} x KL to {whose}'s soft targets at temperature {self.temperature:g}{share}"


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
            "theseus_pl.app.methods.method): pick a method with method=NAME."
        )})  # fmt: skip
    if isinstance(settings.get("for_kinds"), list):  # a list in YAML; the method holds it as a tuple
        settings["for_kinds"] = tuple(settings["for_kinds"])
    return cls(**settings)


def student_module(
    inputs: MethodInputs, student: PreTrainedModel, alpha: float, temperature: float, beta: float = 0.0
) -> pl.LightningModule:
    """What trains a student that is a model of its own (truncation, ShortGPT's healing, KD, PKD): the run's loss
    alone (task or language-model loss) when no soft target weighs in; else ``alpha ·`` the KL to the frozen
    teacher's soft targets at ``temperature`` ``+ (1 - alpha) ·`` the run's loss (``+ beta ·`` PKD's patient
    loss), the teacher (:meth:`MethodInputs.teacher`) loaded once more."""
    if alpha == 0 and beta == 0:
        return FineTuningModule(student, inputs.metrics(), **inputs.optimizer)
    return DistillationModule(
        student, inputs.teacher(), inputs.metrics(), alpha=alpha, temperature=temperature, beta=beta,
        **inputs.optimizer,
    )  # fmt: skip


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
