"""``results.json`` of a run that compresses a classifier or regressor on a task (an encoder): its typed record.

:class:`TaskModelResults` is the body of the :mod:`~theseus_pl.app.results.envelope` for this kind (``kind``
``task_model``). Its fields are the file's keys, in the file's order, and nested records are nested objects, so the
file stays easy to read for people and for ``pandas.json_normalize``. The pipeline builds the record; the headline,
the model card, the sweep report, W&B and the deploy command read its attributes. A key that an older theseus_pl did
not write yet (successor shapes, the layer stacks' parameters, ``failed_steps``, ``wandb``, ...) is read as the
field's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.results.deployment_block import deployment_from
from theseus_pl.app.results.envelope import (
    Hardware,
    Keys,
    RunRecord,
    WandbLink,
    envelope_fields,
)
from theseus_pl.app.results.number_text import known, shown
from theseus_pl.app.results.search_finding import SearchedRun, SearchFinding, read_search_finding
from theseus_pl.core.memory_record import PeakMemory
from theseus_pl.deployment.record import LEFT_OUT_AT_DEFAULT, Deployment


@dataclass(frozen=True)
class ModelShape:
    """A model's depth and widths (None where its family has no such width)."""

    layers: int
    hidden_size: int | None  # the layers' width (narrower than the embeddings' for a narrow successor)
    intermediate_size: int | None  # the feed-forward width


@dataclass(frozen=True)
class PredecessorResult:
    """The fine-tuned model being compressed, scored on the dev set."""

    score: float | None  # the dev headline x100; None (null) when not a number
    metrics: dict[str, float | None]  # every component, e.g. accuracy, f1, mean (MNLI's with _m and _mm)
    dir: str  # its checkpoint folder
    origin: str  # "given", "cache" or "fine-tuned"
    shape: ModelShape | None = None


@dataclass(frozen=True)
class SuccessorResult:
    """The compressed model as exported, scored on the dev set."""

    score: float | None
    metrics: dict[str, float | None]
    # The Lightning checkpoint it was exported from, kept with checkpoint.keep=true (None: the run deleted it).
    best_checkpoint: str | None = None
    shape: ModelShape | None = None
    format: str = "transformers"  # or "pickled module" (successor.pt)
    # The training step of that checkpoint, the best dev score's (None: trained without one, or an older file).
    best_step: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)


@dataclass(frozen=True)
class LayerCounts:
    predecessor: int
    successor: int


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of the whole models and of their layer stacks."""

    predecessor: int
    successor: int
    predecessor_layers: int | None = None
    successor_layers: int | None = None


@dataclass(frozen=True)
class DataFacts:
    """What the model card says about the data."""

    train_size: int
    eval_size: int
    eval_splits: list[str]
    text_columns: list[str]
    labels: list[str]  # empty for a regression
    source: str  # where the rows came from, in words
    dataset: str | None  # the hub dataset of a GLUE task
    dataset_config: str | None


@dataclass(kw_only=True)
class TaskModelResults(RunRecord):
    """One run's ``results.json``.

    Not frozen: the pipeline writes the record as soon as the scores are known and fills in the optional steps
    (``speedup``, ``deployment``, ``failed_steps``, ``wandb``, ``wall_seconds``) as they finish.
    """

    kind: ClassVar[str] = TASK_MODEL

    task: str
    method: str
    settings: dict[str, Any] = field(default_factory=dict)  # every value a sweep may vary, flat: "optimizer.lr"
    predecessor: PredecessorResult
    successor: SuccessorResult
    successor_dir: str
    layers: LayerCounts
    params: ParamCounts
    speedup: float | None = None  # predecessor / successor inference time on one dev batch
    # The cores other processes used while it was timed, where that left it out (speedup null); None otherwise.
    speedup_busy_cores: float | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    deployment: Deployment | None = None
    search: SearchFinding | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)  # the pick of a search alone
    # The replacement schedule in words (theseus methods only), as schedule.describe() gives it: "curriculum: p = 0.3
    # at step 0, 1 from step 150". Text for people, parsed by nothing; files written before it hold the schedule's
    # repr, "CurriculumSchedule(b=0.3, k=0.004666666666666666)".
    schedule: str | None = None
    switch_step: int | None = None
    successor_finetuning_steps: int | None = None
    steps: int
    resumed_from: str | None = None
    base_model: str | None = None  # the hub id of the model the user named
    data: DataFacts
    seed: int
    hardware: Hardware | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)  # None: not recorded (older runs)
    single_module_scores: list[float | None] | None = None
    wandb: WandbLink | None = None
    failed_steps: dict[str, str] = field(default_factory=dict)  # optional step -> its error
    # The run's peak memory (core.memory): resident set, CUDA's allocated peak; None in files written before it.
    peak_memory: PeakMemory | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    wall_seconds: float | None = None  # known once every step ran; written after retained_note
    folder: Path | None = field(default=None, compare=False, repr=False)  # where it was read from; not written

    validates_on_dev_score: ClassVar[bool] = True  # val/score is the dev score's: a search may stop a trial under it

    @property
    def retained(self) -> float | None:
        """Successor score over predecessor score; None where that ratio means nothing (see ``retained_note``)."""
        return _retained(self.predecessor.score, self.successor.score)[0]

    @property
    def retained_note(self) -> str | None:
        """Why ``retained`` is None, or None."""
        return _retained(self.predecessor.score, self.successor.score)[1]

    def derived(self) -> dict[str, Any]:
        return {"retained": self.retained, "retained_note": self.retained_note}

    def changed_widths(self) -> list[tuple[str, Any, Any]]:
        """(name, predecessor's, successor's) for each width the successor changed; none for the paper's depth-only
        successors, or results written before successors had shapes."""
        predecessor, successor = self.predecessor.shape, self.successor.shape
        if predecessor is None or successor is None:
            return []
        return [
            (name, getattr(predecessor, key), getattr(successor, key))
            for key, name in WIDTH_NAMES.items()
            if getattr(predecessor, key) != getattr(successor, key)
        ]

    def widths_clause(self) -> str:
        """`` (hidden size 384 to 192, ...)`` after a depth, or nothing when no width changed."""
        changes = ", ".join(f"{name} {before} to {after}" for name, before, after in self.changed_widths())
        return f" ({changes})" if changes else ""

    def successor_in_words(self) -> str:
        return f"{self.task}: {self.layers.successor}-layer successor"

    def headline(self) -> str:
        """The run in one line; a figure that is missing or not finite (a NaN correlation in the process that scored
        it, null once written) as n/a."""
        retained = shown(None if self.retained is None else 100 * self.retained, ".1f", "%")
        speedup = shown(self.speedup, ".2f", "x")
        return (
            f"{self.task}: predecessor {shown(self.predecessor.score, '.2f')}, "
            f"successor {shown(self.successor.score, '.2f')} "
            f"({retained} retained), {self.layers.predecessor} -> {self.layers.successor} layers"
            f"{self.widths_clause()}, {speedup} faster"
        )

    def searched_run(self) -> SearchedRun:
        """What a search weighs this run by besides its deployment (:mod:`~theseus_pl.app.results.search_finding`)."""
        shape = self.successor.shape
        return SearchedRun(self.predecessor.score, self.layers.successor,
                           shape.intermediate_size if shape is not None else None, self.successor_dir)  # fmt: skip

    def objective(self) -> float | None:
        """The successor's dev score: higher is better."""
        return self.successor.score

    def summary(self) -> dict[str, float]:
        """The headline numbers as flat ``final/*`` metrics (those known).

        A deployed run adds each deployed model's dev score and speed-up over the predecessor at each batch size
        (``final/deploy/onnx_int8_score``, ``final/deploy/onnx_int8_speedup_batch_1``, ...).
        """
        deployed: dict[str, float | None] = {}
        if self.deployment is not None:
            scores = self.deployment.dev_score or {}
            deployed.update({f"final/deploy/{name}_score": score for name, score in scores.items()})
            for batch, speedups in self.deployment.speedup_over_predecessor.items():
                named = (speedups or {}).items()
                deployed.update({f"final/deploy/{name}_speedup_{batch}": value for name, value in named})
        summary = {
            "final/predecessor_score": self.predecessor.score,
            "final/successor_score": self.successor.score,
            "final/retained": self.retained,
            "final/best_step": None if self.successor.best_step is None else float(self.successor.best_step),
            "final/speedup": self.speedup,
            "final/params_predecessor": float(self.params.predecessor),
            "final/params_successor": float(self.params.successor),
            **deployed,
        }
        return {key: value for key, value in summary.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskModelResults:
        """A record from the file's layout, of any schema version (``retained`` and ``retained_note`` are derived)."""
        read = Keys(data, "")
        predecessor, successor = read.nested("predecessor"), read.nested("successor")
        return cls(
            task=read.required("task"),
            **envelope_fields(read),
            predecessor=PredecessorResult(
                score=predecessor.required("score"),
                metrics=dict(predecessor.required("metrics")),
                dir=predecessor.required("dir"),
                origin=predecessor.required("origin"),
                shape=_shape(predecessor.nested_if_given("shape")),
            ),
            successor=SuccessorResult(
                score=successor.required("score"),
                metrics=dict(successor.required("metrics")),
                best_checkpoint=successor.optional("best_checkpoint"),
                best_step=successor.optional("best_step"),
                shape=_shape(successor.nested_if_given("shape")),
                format=successor.optional("format", "transformers"),
            ),
            successor_dir=read.required("successor_dir"),
            layers=LayerCounts(**read.nested("layers").pick(LayerCounts)),
            params=ParamCounts(**read.nested("params").pick(ParamCounts)),
            speedup=read.optional("speedup"),
            speedup_busy_cores=read.optional("speedup_busy_cores"),
            deployment=deployment_from(deployment) if (deployment := read.nested_if_given("deployment")) else None,
            search=read_search_finding(read.nested_if_given("search")),
            switch_step=read.optional("switch_step"),
            base_model=read.optional("base_model"),
            data=DataFacts(**read.nested("data").pick(DataFacts)),
            single_module_scores=read.optional("single_module_scores"),
        )


WIDTH_NAMES = {"hidden_size": "hidden size", "intermediate_size": "feed-forward width"}


def _retained(predecessor_score: float | None, successor_score: float | None) -> tuple[float | None, str | None]:
    """Successor score over predecessor score, or None with the reason where that ratio means nothing."""
    scores = (predecessor_score, successor_score)
    if not all(known(score) for score in scores):  # None: NaN as the file stores it
        return None, "a score is not a number (e.g. a correlation of constant predictions)"
    if predecessor_score <= 0:
        return None, f"the predecessor's score is {predecessor_score:g}: a share of it means nothing"
    return successor_score / predecessor_score, None


def _shape(read: Keys | None) -> ModelShape | None:
    return ModelShape(**read.pick(ModelShape)) if read else None
