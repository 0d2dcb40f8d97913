"""``results.json``: the typed record of a finished run, and the one module that writes and reads it.

:class:`RunResults` is the schema. Its fields are the file's keys, in the file's order, and nested records are
nested objects, so the file stays easy to read for people and for ``pandas.json_normalize``. The pipeline builds
the record; the headline, the model card, the sweep report, W&B and the deploy command read its attributes.

Schema versions: 2 (this one) writes ``"schema_version": 2`` as the first key. A file without that key is
version 1, written before it was added; its layout is the same, so both versions are read the same way. A key that
an older theseus_pl did not write yet (successor shapes, the layer stacks' parameters, ``failed_steps``, ``wandb``,
...) is read as the field's default; a missing key that has no default is an error naming it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar

from theseus_pl.deployment.record import LEFT_OUT_AT_DEFAULT, Deployment, DeploySettings

SCHEMA_VERSION = 2


class ResultsError(ValueError):
    """A ``results.json`` this version cannot read: a newer schema, or a key missing."""


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
    # The Lightning checkpoint it was exported from; deleted when the run finishes, unless checkpoint.keep=true.
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


@dataclass(frozen=True)
class WandbLink:
    """Where the run's W&B run lives."""

    id: str
    name: str
    group: str | None
    url: str | None  # None offline
    dir: str  # the local W&B run folder


@dataclass(frozen=True)
class Hardware:
    """What the run trained on, and in which precision (``trainer.precision=auto`` decides by the machine:
    :mod:`theseus_pl.lightning.precision`)."""

    precision: str  # what Lightning trained and evaluated in: "32-true", "bf16-mixed", ...
    precision_requested: str  # trainer.precision as set: "auto" unless given
    accelerator: str  # "cpu" or "gpu"
    cpu: str | None  # the CPU's model name
    cpu_flags: list[str]  # those of avx2, avx512f, avx512_vnni, avx512_bf16, amx_tile, amx_bf16, amx_int8 it has
    precision_reason: str | None = None  # why that precision, in words; None in files written before it was recorded


@dataclass(kw_only=True)
class RunResults:
    """One run's ``results.json``.

    Not frozen: the pipeline writes the record as soon as the scores are known and fills in the optional steps
    (``speedup``, ``deployment``, ``failed_steps``, ``wandb``, ``wall_seconds``) as they finish.
    """

    schema_version: ClassVar[int] = SCHEMA_VERSION

    task: str
    method: str
    settings: dict[str, Any] = field(default_factory=dict)  # every value a sweep may vary, flat: "optimizer.lr"
    predecessor: PredecessorResult
    successor: SuccessorResult
    successor_dir: str
    layers: LayerCounts
    params: ParamCounts
    speedup: float | None = None  # predecessor / successor inference time on one dev batch
    deployment: Deployment | None = None
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
    wall_seconds: float | None = None  # known once every step ran; written after retained_note
    folder: Path | None = field(default=None, compare=False, repr=False)  # where it was read from; not written

    @property
    def retained(self) -> float | None:
        """Successor score over predecessor score; None where that ratio means nothing (see ``retained_note``)."""
        return _retained(self.predecessor.score, self.successor.score)[0]

    @property
    def retained_note(self) -> str | None:
        """Why ``retained`` is None, or None."""
        return _retained(self.predecessor.score, self.successor.score)[1]

    def lookup(self, path: str) -> Any:
        """The value at a dotted ``results.json`` path (``method``, ``layers.successor``, ``successor.shape.layers``,
        ``successor.metrics.f1``); None where there is none."""
        value: Any = self
        for part in path.split("."):
            if isinstance(value, Mapping):
                value = value.get(part)
            elif part in _readable_names(value):
                value = getattr(value, part)
            else:
                return None
        return value

    def to_dict(self) -> dict[str, Any]:
        """The record as ``results.json`` lays it out (numbers as they are; :func:`write_results` nulls NaN)."""
        written: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        kept = [f for f in fields(self) if f.name not in _LAST and not _at_default(self, f)]
        written.update({f.name: _plain(getattr(self, f.name)) for f in kept})
        written["retained"], written["retained_note"] = self.retained, self.retained_note
        if self.wall_seconds is not None:
            written["wall_seconds"] = self.wall_seconds
        return written

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResults:
        """A record from the file's layout, version 1 or 2 (``retained`` and ``retained_note`` are derived)."""
        read = _Keys(data, "")
        predecessor, successor = read.nested("predecessor"), read.nested("successor")
        return cls(
            task=read.required("task"),
            method=read.required("method"),
            settings=dict(read.optional("settings") or {}),
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
            deployment=_deployment(deployment) if (deployment := read.nested_if_given("deployment")) else None,
            schedule=read.optional("schedule"),
            switch_step=read.optional("switch_step"),
            successor_finetuning_steps=read.optional("successor_finetuning_steps"),
            steps=read.required("steps"),
            resumed_from=read.optional("resumed_from"),
            base_model=read.optional("base_model"),
            data=DataFacts(**read.nested("data").pick(DataFacts)),
            seed=read.required("seed"),
            hardware=Hardware(**hardware.pick(Hardware)) if (hardware := read.nested_if_given("hardware")) else None,
            single_module_scores=read.optional("single_module_scores"),
            wandb=WandbLink(**wandb.pick(WandbLink)) if (wandb := read.nested_if_given("wandb")) else None,
            failed_steps=dict(read.optional("failed_steps") or {}),
            wall_seconds=read.optional("wall_seconds"),
        )


_LAST = ("wall_seconds", "folder")  # written after the derived retained and retained_note, or not at all


def write_results(path: Path, results: RunResults) -> Path:
    """Valid JSON (a non-finite number, e.g. a correlation of constant predictions, becomes null), written atomically.

    Atomic because the file is written as soon as the scores are known and rewritten after each later step: a
    job killed in between leaves the previous complete file, never half of one.
    """
    return _write_json(path, results.to_dict())


def read_results(path: Path) -> RunResults:
    """The record in ``path`` (schema version 1 or 2), with ``folder`` set to the folder holding it."""
    data = json.loads(Path(path).read_text())
    version = data.get("schema_version", 1) if isinstance(data, dict) else 1
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultsError(
            f"{path} is results.json schema version {version}; this theseus_pl reads versions 1 to {SCHEMA_VERSION}: "
            "upgrade theseus_pl to read it."
        )
    try:
        results = RunResults.from_dict(data)
    except ResultsError as error:
        raise ResultsError(f"{path}: {error}") from None
    results.folder = Path(path).parent
    return results


def deployment_dict(deployment: Deployment) -> dict[str, Any]:
    """The ``deployment`` block as ``results.json`` lays it out (numbers as they are)."""
    return _plain(deployment)


def write_deployment(path: Path, deployment: Deployment) -> Path:
    """The ``deployment`` block alone (``<model>/onnx/deployment.json``), written as :func:`write_results` writes."""
    return _write_json(path, deployment_dict(deployment))


def read_deployment(path: Path) -> Deployment:
    """The ``deployment`` block :func:`write_deployment` wrote."""
    try:
        return _deployment(_Keys(json.loads(Path(path).read_text()), ""))
    except ResultsError as error:
        raise ResultsError(f"{path}: {error}") from None


def flat_summary(results: RunResults) -> dict[str, float | None]:
    """The headline numbers as flat ``final/*`` metrics for loggers; None where a number is missing.

    A deployed run adds each deployed model's dev score and speed-up over the predecessor at each batch size
    (``final/deploy/onnx_int8_score``, ``final/deploy/onnx_int8_speedup_batch_1``, ...).
    """
    deployed: dict[str, float | None] = {}
    if results.deployment is not None:
        scores = results.deployment.dev_score or {}
        deployed.update({f"final/deploy/{name}_score": score for name, score in scores.items()})
        for batch, speedups in results.deployment.speedup_over_predecessor.items():
            deployed.update({f"final/deploy/{name}_speedup_{batch}": value for name, value in (speedups or {}).items()})
    return {
        "final/predecessor_score": results.predecessor.score,
        "final/successor_score": results.successor.score,
        "final/retained": results.retained,
        "final/best_step": None if results.successor.best_step is None else float(results.successor.best_step),
        "final/speedup": results.speedup,
        "final/params_predecessor": float(results.params.predecessor),
        "final/params_successor": float(results.params.successor),
        **deployed,
    }


def _retained(predecessor_score: float | None, successor_score: float | None) -> tuple[float | None, str | None]:
    """Successor score over predecessor score, or None with the reason where that ratio means nothing."""
    scores = (predecessor_score, successor_score)
    if any(score is None or not math.isfinite(score) for score in scores):  # None: NaN as the file stores it
        return None, "a score is not a number (e.g. a correlation of constant predictions)"
    if predecessor_score <= 0:
        return None, f"the predecessor's score is {predecessor_score:g}: a share of it means nothing"
    return successor_score / predecessor_score, None


def write_record(path: Path, record: Any) -> Path:
    """Any record of this module's kind (a dataclass of plain values and records) as JSON, atomically, non-finite
    numbers as null, after the schema version: how the language-model runs write their ``results.json``."""
    return _write_json(path, {"schema_version": SCHEMA_VERSION, **_plain(record)})


def _write_json(path: Path, content: dict[str, Any]) -> Path:
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(json.dumps(_finite(content), indent=2, allow_nan=False) + "\n")
    os.replace(staged, path)
    return path


def _plain(value: Any) -> Any:
    """Records as JSON objects (their fields in order), tuples as lists; everything else as it is."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value) if not _at_default(value, f)}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _at_default(record: Any, item: Field[Any]) -> bool:
    """A field added after older files were written, at its default: left out of the file (``LEFT_OUT_AT_DEFAULT``)."""
    if not item.metadata.get("left_out_at_default"):
        return False
    default = item.default_factory() if item.default_factory is not MISSING else item.default
    return getattr(record, item.name) == default


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


class _Keys:
    """A JSON object's keys, read by name; a missing one is a :class:`ResultsError` with its dotted path."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ResultsError(f"{where.rstrip('.') or 'the file'} is not a JSON object")
        self.data, self.where = data, where

    def required(self, key: str) -> Any:
        if key not in self.data:
            raise ResultsError(f"no {self.where}{key}: not a theseus_pl results.json, or a damaged one")
        return self.data[key]

    def optional(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def nested(self, key: str) -> _Keys:
        return _Keys(self.required(key), f"{self.where}{key}.")

    def nested_if_given(self, key: str) -> _Keys | None:
        """The object under ``key``; None where the key is absent or null (or empty)."""
        return self.nested(key) if self.data.get(key) else None

    def pick(self, record: type) -> dict[str, Any]:
        """The keys of a flat record: required where the field has no default, absent ones left to it."""
        picked = {}
        for item in fields(record):
            if item.name in self.data:
                picked[item.name] = self.data[item.name]
            elif not _has_default(item):
                self.required(item.name)
        return picked


def _readable_names(record: Any) -> set[str]:
    """A record's names as ``results.json`` has them: its fields (and, on the run's, ``retained`` and its note)."""
    if not is_dataclass(record) or isinstance(record, type):
        return set()
    derived = {"retained", "retained_note"} if isinstance(record, RunResults) else set()
    return {item.name for item in fields(record) if item.name != "folder"} | derived


def _has_default(item: Field[Any]) -> bool:
    return item.default is not MISSING or item.default_factory is not MISSING


def _shape(read: _Keys | None) -> ModelShape | None:
    return ModelShape(**read.pick(ModelShape)) if read else None


def _deployment(read: _Keys) -> Deployment:
    values = read.pick(Deployment)
    settings = read.nested("settings").pick(DeploySettings)
    settings["batch_sizes"] = tuple(settings.get("batch_sizes", DeploySettings.batch_sizes))
    return Deployment(**{**values, "settings": DeploySettings(**settings)})
