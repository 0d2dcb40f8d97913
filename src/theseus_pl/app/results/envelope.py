"""``results.json``: the envelope every run's record shares, whatever its kind, and the JSON it is written as.

A run's record is a dataclass of its kind over :class:`RunRecord`, kept in its kind's folder
(``app/kinds/*/record.py``): ``TaskModelResults`` for a classifier or regressor compressed on a task,
``LanguageModelResults`` for a decoder LM compressed on text, ``EmbeddingModelResults`` for a sentence-embedding model.
Every file opens with ``schema_version`` and ``kind``; the keys every kind has (``method``, ``settings``, ``seed``,
``steps``, ``resumed_from``, ``schedule``, ``successor_finetuning_steps``, ``hardware``, ``wandb``, ``failed_steps``,
``wall_seconds``, ``peak_memory``) mean the same in every kind and are read by one function (:func:`envelope_fields`),
and each kind names its headline numbers for loggers in its :meth:`RunRecord.summary`. :func:`~.reading.read_run` reads
a file of any kind. Its readers (the card writer, publish, deploy, the report) tell the kinds apart by the name each
record says it is (``kind``), each asking the part its kind registered (:mod:`~.registry`, through :func:`for_kind` and
:func:`by_kind`), never by its class: a new kind is one registration, and a reader whose part a kind did not register
refuses its records in one line.

Schema versions: 3 (this one) writes ``kind`` after ``schema_version`` in every file. Version 2 wrote ``kind`` in
language-model runs' files only; version 1 (no ``schema_version``) was written before decoder LMs existed. The
layouts are otherwise the same, so every version reads the same way. A key that an older theseus_pl did not write
yet is read as the field's default; a missing key that has no default is an error naming it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from theseus_pl.core.memory_record import PeakMemory
from theseus_pl.core.timing import was_busy

SCHEMA_VERSION = 3
_LAST = ("wall_seconds", "folder")  # written after the derived values, or not at all
Part = TypeVar("Part")


class ResultsError(ValueError):
    """A ``results.json`` this version cannot read: a newer schema, an unknown kind, or a key missing."""


class UnknownKind(ResultsError):
    """A record of a kind that one of its readers (the card writer, publish, deploy, the report) has no part for: a
    kind the reader of files knows before every reader of records learnt it. One line, naming the kinds it serves."""


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
    :mod:`theseus_pl.core.precision`)."""

    precision: str  # what Lightning trained and evaluated in: "32-true", "bf16-mixed", ...
    precision_requested: str  # trainer.precision as set: "auto" unless given
    accelerator: str  # "cpu" or "gpu"
    cpu: str | None  # the CPU's model name
    cpu_flags: list[str]  # those of avx2, avx512f, avx512_vnni, avx512_bf16, amx_tile, amx_bf16, amx_int8 it has
    precision_reason: str | None = None  # why that precision, in words; None in files written before it was recorded


class RunRecord:
    """What every run's record holds, whatever its kind: the envelope of ``results.json``.

    Each kind is a dataclass over this class that declares these fields in its own file order (so the files of
    earlier versions keep their layout); the envelope writes, reads and looks up all of them the same way.
    """

    kind: ClassVar[str]
    method: str
    settings: dict[str, Any]  # every value a sweep may vary, flat: "optimizer.lr"
    seed: int
    steps: int  # optimizer steps trained
    resumed_from: str | None  # the checkpoint an interrupted run went on from
    schedule: str | None  # the replacement schedule in words (Theseus only)
    successor_finetuning_steps: int | None  # optimizer steps after the switch to p = 1 (phase 2; Theseus only)
    hardware: Hardware | None  # None: not recorded (older encoder runs)
    wandb: WandbLink | None
    failed_steps: dict[str, str]  # optional step -> its error
    wall_seconds: float | None  # known once every step ran; written last
    peak_memory: PeakMemory | None  # the run's peak memory (core.memory), known with wall_seconds
    folder: Path | None  # where it was read from; not written

    def summary(self) -> dict[str, float]:
        """The headline numbers as flat ``final/*`` metrics: the W&B run's summary and the CSV log's last row."""
        raise NotImplementedError

    def headline(self) -> str:
        """The run's outcome in one line, as ``python -m theseus_pl`` logs it when the run ends."""
        raise NotImplementedError

    def objective(self) -> float | None:
        """The number a Hydra sweeper optimises (the successor's headline figure)."""
        raise NotImplementedError

    def successor_in_words(self) -> str:
        """The successor in a few words, as publish's commit message names it: ``RTE: 3-layer successor``."""
        raise NotImplementedError

    def derived(self) -> dict[str, Any]:
        """Values computed from the record that its file carries for readers (written before ``wall_seconds``)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """The record as ``results.json`` lays it out (numbers as they are; :func:`write_results` nulls NaN)."""
        written: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": self.kind}
        kept = [f for f in fields(self) if f.name not in _LAST and not _at_default(self, f)]  # type: ignore[arg-type]
        written.update({f.name: plain(getattr(self, f.name)) for f in kept})
        written.update(self.derived())
        if self.wall_seconds is not None:
            written["wall_seconds"] = self.wall_seconds
        return written

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRecord:
        """A record from its file's layout, of any schema version."""
        raise NotImplementedError

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


def for_kind(parts: Mapping[str, Part], record: RunRecord, reader: str) -> Part:
    """``parts``' entry for the record's kind: each reader of records asks the part the kind registered (a card
    writer, a report's tables: :func:`~.registry.parts`) by the name the record says it is, never by its class; a kind
    that registered none is refused in one line (:class:`UnknownKind`)."""
    if record.kind not in parts:
        raise UnknownKind(_unknown(record, parts, reader))
    return parts[record.kind]


def by_kind(records: Iterable[RunRecord], kinds: Iterable[str], reader: str) -> dict[str, list[Any]]:
    """The records by kind, a list for each of ``kinds`` (empty where none is of it), in their order: how a reader of
    many records (the report, the dashboard) parts them. A record of another kind is refused in one line, as
    :func:`for_kind` refuses it. Each list holds its kind's record class, which a kind's name cannot tell a type
    checker: hence ``Any``."""
    parted: dict[str, list[Any]] = {kind: [] for kind in kinds}
    for record in records:
        if record.kind not in parted:
            raise UnknownKind(_unknown(record, parted, reader))
        parted[record.kind].append(record)
    return parted


def _unknown(record: RunRecord, known: Iterable[str], reader: str) -> str:
    where = f"{record.folder} is" if record.folder else "This is"
    kinds = ", ".join(repr(kind) for kind in known)
    return f"{where} a run of kind {record.kind!r}; {reader} knows runs of kind {kinds} only."


def trusted(speed: dict[str, float] | None) -> dict[str, float] | None:
    """Speed figures (with ``other_cores``, as :mod:`theseus_pl.core.timing` records them), where they were timed on a
    machine no other process kept busy; None otherwise: a figure taken beside other work is not the model's."""
    return None if speed is None or was_busy(speed.get("other_cores")) else speed


def budget_settings(trainer: Mapping[str, Any]) -> dict[str, Any]:
    """The run's training budget as its record's settings: ``trainer.max_steps``, and ``trainer.max_epochs`` where it
    bounds the run (at least 1). Without it every run at ``max_steps=-1`` records the same budget whatever its epochs,
    and the report would compare runs of 3 and 5 epochs as equals."""
    max_epochs = trainer.get("max_epochs")
    bounded = isinstance(max_epochs, int) and not isinstance(max_epochs, bool) and max_epochs > 0
    return {"trainer.max_steps": trainer.get("max_steps"), **({"trainer.max_epochs": max_epochs} if bounded else {})}


def envelope_fields(read: Keys) -> dict[str, Any]:
    """The envelope's fields of a file of any kind and version (``folder`` is set by the reader)."""
    return {
        "method": read.required("method"),
        "settings": dict(read.optional("settings") or {}),
        "seed": read.required("seed"),
        "steps": read.required("steps"),
        "resumed_from": read.optional("resumed_from"),
        "schedule": read.optional("schedule"),
        "successor_finetuning_steps": read.optional("successor_finetuning_steps"),
        "hardware": Hardware(**hardware.pick(Hardware)) if (hardware := read.nested_if_given("hardware")) else None,
        "wandb": WandbLink(**wandb.pick(WandbLink)) if (wandb := read.nested_if_given("wandb")) else None,
        "failed_steps": dict(read.optional("failed_steps") or {}),
        "wall_seconds": read.optional("wall_seconds"),
        "peak_memory": PeakMemory(**memory.pick(PeakMemory))
        if (memory := read.nested_if_given("peak_memory"))
        else None,
    }


def write_results(path: Path, record: RunRecord) -> Path:
    """Valid JSON (a non-finite number, e.g. a correlation of constant predictions, becomes null), written atomically.

    Atomic because the file is written as soon as the scores are known and rewritten after each later step: a
    job killed in between leaves the previous complete file, never half of one.
    """
    return write_json(path, record.to_dict())


def write_json(path: Path, content: dict[str, Any]) -> Path:
    """``content`` as JSON (:func:`strict_json`), atomically."""
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(strict_json(content) + "\n")
    os.replace(staged, path)
    return path


def strict_json(content: Any) -> str:
    """``content`` as JSON text that every JSON reader takes, indented, its non-finite numbers (an inf perplexity, a
    NaN correlation of constant predictions) as null: what a file holds and a command prints alike (``json.dumps``
    writes them ``Infinity`` and ``NaN``, which ``jq`` and strict readers refuse)."""
    return json.dumps(_finite(content), indent=2, allow_nan=False)


def plain(value: Any) -> Any:
    """Records as JSON objects (their fields in order), tuples as lists; everything else as it is."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value) if not _at_default(value, f)}
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
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


class Keys:
    """A JSON object's keys, read by name; a missing one is a :class:`ResultsError` with its dotted path. Each kind's
    ``from_dict`` reads its file through it."""

    def __init__(self, data: Any, where: str, file: str = "results.json") -> None:
        if not isinstance(data, Mapping):
            raise ResultsError(f"{where.rstrip('.') or 'the file'} is not a JSON object")
        self.data, self.where, self.file = data, where, file

    def required(self, key: str) -> Any:
        if key not in self.data:
            raise ResultsError(f"no {self.where}{key}: not a theseus_pl {self.file}, or a damaged one")
        return self.data[key]

    def optional(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def nested(self, key: str) -> Keys:
        return Keys(self.required(key), f"{self.where}{key}.", self.file)

    def nested_if_given(self, key: str) -> Keys | None:
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
    """A record's names as ``results.json`` has them: its fields (and, on a run's, its kind and derived values)."""
    if not is_dataclass(record) or isinstance(record, type):
        return set()
    derived = {"kind", *record.derived()} if isinstance(record, RunRecord) else set()
    return {item.name for item in fields(record) if item.name != "folder"} | derived


def _has_default(item: Field[Any]) -> bool:
    return item.default is not MISSING or item.default_factory is not MISSING
