"""Reading a ``results.json`` of any kind: one reader that checks the schema version and reads it as the record of
the kind registered under its ``kind`` (:mod:`~theseus_pl.app.results.registry`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar, overload

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.results.envelope import SCHEMA_VERSION, ResultsError, RunRecord
from theseus_pl.app.results.field_types import check_types
from theseus_pl.app.results.registry import parts

R = TypeVar("R", bound=RunRecord)


@overload
def read_run(path: Path) -> RunRecord: ...
@overload
def read_run(path: Path, record_type: type[R]) -> R: ...
def read_run(path: Path, record_type: type[RunRecord] | None = None) -> RunRecord:
    """The record in ``path``, of any kind and any schema version, with ``folder`` set to the folder holding it; with
    ``record_type`` (``read_run(path, TaskModelResults)``), typed as that kind's record, and another kind's refused,
    naming both.

    Files of schema version 1, and task-model files of version 2, carry no ``kind``: they are task-model runs.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # cut short, not JSON, not UTF-8, unreadable
        raise ResultsError(f"{path} cannot be read ({type(error).__name__}: {error}).") from None
    if not isinstance(data, dict):  # valid JSON of another shape: an AttributeError that stopped a whole report
        raise ResultsError(f"{path} holds a JSON {type(data).__name__}, not the object of keys a results.json holds.")
    version = data.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:  # "3", 0: no version written here
        raise ResultsError(
            f"{path} has schema_version {version!r}, which is no schema version (a whole number from 1; this "
            f"theseus_pl writes {SCHEMA_VERSION}): the file was edited, or not written by theseus_pl."
        )
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"{path} is results.json schema version {version}; this theseus_pl reads versions 1 to {SCHEMA_VERSION}: "
            "upgrade theseus_pl to read it."
        )
    kind, records = data.get("kind", TASK_MODEL), parts("record")
    if kind not in records:
        raise ResultsError(f"{path} is a results.json of kind {kind!r}; this theseus_pl reads {', '.join(records)}.")
    try:
        record = records[kind].from_dict(data)
        check_types(record)
    except ResultsError as error:
        raise ResultsError(f"{path}: {error}") from None
    except (TypeError, ValueError) as error:  # a value its record could not be built from: a list where an object is
        raise ResultsError(f"{path} holds a value of the wrong shape ({error}).") from None
    if record_type is not None and record.kind != record_type.kind:
        raise ResultsError(f"{path} is a results.json of kind {record.kind!r}; this reads {record_type.kind!r} runs "
                           f"only ({record_type.__name__}): read_run(path) reads every kind.")  # fmt: skip
    record.folder = Path(path).parent
    return record
