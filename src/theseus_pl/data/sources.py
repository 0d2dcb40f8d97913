"""Where task data comes from: the Hugging Face hub, a local GLUE folder, or the user's own files.

Every source returns a split as a ``datasets.Dataset`` with the task's text columns and, for labelled splits,
``label`` (class index, or float score for regression); test splits carry ``idx``, the row id used in GLUE
submissions. Each source also fingerprints what it reads, for the tokenisation cache.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import pandas as pd
from datasets import Dataset

from theseus_pl.data.cache_entry import content_digest
from theseus_pl.data.tasks import TaskSpec

csv.field_size_limit(sys.maxsize)  # some GLUE sentences (QNLI, MNLI parses) exceed the 128 KiB default


class Source(Protocol):
    def read(self, task: TaskSpec, split: str) -> Dataset: ...

    def fingerprint(self, task: TaskSpec, split: str) -> str: ...

    def describe(self, task: TaskSpec) -> str:
        """Where the data comes from, for a model card: no local path."""
        ...


def is_test_split(split: str) -> bool:
    return split.startswith("test")


class HubSource:
    """``nyu-mll/glue`` (or another hub dataset with the same configs and columns)."""

    def __init__(self, dataset: str = "nyu-mll/glue") -> None:
        self.dataset = dataset

    def fingerprint(self, task: TaskSpec, split: str) -> str:
        return f"hub:{self.dataset}:{task.hub_config}:{split}"

    def describe(self, task: TaskSpec) -> str:
        return f"the hub dataset `{self.dataset}` (config `{task.hub_config}`)"

    def read(self, task: TaskSpec, split: str) -> Dataset:
        from datasets import load_dataset

        if task.hub_config is None:
            raise ValueError(f"Task {task.name!r} is not on the hub; give its files with data.files.")
        try:
            dataset = load_dataset(self.dataset, task.hub_config, split=split)
        except Exception as error:
            folder = task.tsv.folder if task.tsv else task.name
            raise RuntimeError(
                f"Could not load {self.dataset} ({task.hub_config}, split {split}) from the Hugging Face hub: "
                f"{type(error).__name__}: {error}. Offline? Use a local copy of GLUE with data.glue_dir=PATH "
                f"(classic layout: PATH/{folder}/train.tsv, dev.tsv, test.tsv), or your own files with data.files."
            ) from error
        drop = ["label"] if is_test_split(split) else ["idx"]
        return _require_rows(
            dataset.remove_columns([c for c in drop if c in dataset.column_names]),
            task,
            split,
            f"{self.dataset}/{task.hub_config}",
        )


class GlueDirSource:
    """A folder in the classic GLUE download layout: ``<root>/RTE/train.tsv`` and so on."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser()

    def path(self, task: TaskSpec, split: str) -> Path:
        if task.tsv is None:
            raise ValueError(f"Task {task.name!r} has no classic GLUE layout; give its files with data.files.")
        if not self.root.is_dir():
            raise FileNotFoundError(
                f"data.glue_dir={self.root} is not a folder. Expected the classic GLUE layout: "
                f"{self.root}/{task.tsv.folder}/{{{','.join(task.tsv.files.values())}}}.tsv"
            )
        if split not in task.tsv.files:
            raise ValueError(f"{task.name} has no split {split!r}; it has {', '.join(task.tsv.files)}.")
        path = self.root / task.tsv.folder / f"{task.tsv.files[split]}.tsv"
        if not path.is_file():
            raise FileNotFoundError(
                f"Missing {path}. The classic GLUE layout for {task.name} is "
                f"{self.root}/{task.tsv.folder}/{{{','.join(task.tsv.files.values())}}}.tsv"
            )
        return path

    def fingerprint(self, task: TaskSpec, split: str) -> str:
        return _file_fingerprint(self.path(task, split))

    def describe(self, task: TaskSpec) -> str:
        return f"GLUE {task.name}, from the classic GLUE files"

    def read(self, task: TaskSpec, split: str) -> Dataset:
        layout = task.tsv
        path = self.path(task, split)
        # utf-8-sig: MRPC starts with a byte-order mark
        with utf8_named(path), path.open(encoding="utf-8-sig", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
        headerless = bool(layout.headerless_names) and not is_test_split(split)
        header = list(layout.headerless_names) if headerless else rows.pop(0) if rows else []
        first_line = 1 if headerless else 2

        wanted = [layout.columns[c] for c in task.text_columns]
        labelled = not is_test_split(split)
        if labelled:
            wanted.append(layout.columns["label"])
        _require_columns(wanted, header, path)
        positions = [header.index(name) for name in wanted]
        index_position = header.index(layout.index_column) if layout.index_column in header else None

        columns: dict[str, list] = {name: [] for name in (*task.text_columns, "label" if labelled else "idx")}
        for number, row in enumerate(rows, start=first_line):
            if len(row) != len(header):
                raise ValueError(
                    f"{path}, line {number}: {len(row)} fields where the header has {len(header)}. The file must be "
                    "tab-separated with no quoting."
                )
            for name, position in zip(task.text_columns, positions, strict=False):
                columns[name].append(row[position])
            if labelled:
                columns["label"].append(_parse_label(row[positions[-1]], layout.label_values, path, f"line {number}"))
            else:
                columns["idx"].append(int(row[index_position]) if index_position is not None else number - first_line)
        return _require_rows(Dataset.from_dict(columns), task, split, str(path))


class FilesSource:
    """The user's own files (csv, tsv, json, jsonl, parquet), one per split, columns named by the task."""

    SUFFIXES = (".csv", ".tsv", ".json", ".jsonl", ".parquet")

    def __init__(self, files: Mapping[str, str | Path], label_column: str = "label") -> None:
        self.files = {split: Path(path).expanduser() for split, path in files.items()}
        self.label_column = label_column

    def path(self, split: str) -> Path:
        if split not in self.files:
            raise ValueError(f"data.files has no {split!r} file; it names {', '.join(self.files) or 'none'}.")
        path = self.files[split]
        if path.is_dir():
            raise FileNotFoundError(f"data.files.{split}={path} is a folder: name the {split} split's file in it.")
        if not path.is_file():
            raise FileNotFoundError(f"data.files.{split}={path} does not exist.")
        if path.suffix.lower() not in self.SUFFIXES:
            raise ValueError(f"data.files.{split}={path}: unsupported format; use one of {', '.join(self.SUFFIXES)}.")
        return path

    def fingerprint(self, task: TaskSpec, split: str) -> str:
        return _file_fingerprint(self.path(split)) + f":{self.label_column}"

    def describe(self, task: TaskSpec) -> str:
        return "the user's own files (" + ", ".join(f"{split}: {path.name}" for split, path in self.files.items()) + ")"

    def read(self, task: TaskSpec, split: str) -> Dataset:
        path = self.path(split)
        with utf8_named(path):
            frame = _read_frame(path)
        header = [str(column) for column in frame.columns]
        labelled = self.label_column in header or not is_test_split(split)
        wanted = [*task.text_columns, *([self.label_column] if labelled else [])]
        _require_columns(wanted, header, path)
        _refuse_repeated_columns(wanted, path)
        columns: dict[str, list] = {name: _texts(frame[name], path) for name in task.text_columns}
        if labelled:
            values = ["" if pd.isna(v) else str(v) for v in frame[self.label_column]]
            label_values = task.label_names
            where = row_position(path)
            columns["label"] = [_parse_label(v, label_values, path, where(n)) for n, v in enumerate(values)]
        else:
            columns["idx"] = list(range(len(frame)))
        return _require_rows(Dataset.from_dict(columns), task, split, str(path))


def row_position(path: Path) -> Callable[[int], str]:
    """How a row of ``path`` is found in it by the row's index, in words: "line 9" in a CSV/TSV file (the header is
    line 1), "line 8" in JSON lines, "record 8" of a JSON array, "row 8" of a parquet file (neither has lines)."""
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return lambda index: f"line {index + 2}"
    if suffix == ".jsonl" or (suffix == ".json" and not path.read_bytes().lstrip().startswith(b"[")):
        return lambda index: f"line {index + 1}"
    return lambda index: f"{'record' if suffix == '.json' else 'row'} {index + 1}"


def _texts(column: pd.Series, path: Path) -> list[str]:
    """A text column as strings; a row without text (a JSON row without the key, a null in JSON or parquet) is
    refused with where it is, as a training row made of the string "nan" would be silently wrong."""
    missing = column.isna().to_numpy().nonzero()[0]
    if len(missing):
        where = row_position(path)
        more = f" (and {len(missing) - 1} more rows)" if len(missing) > 1 else ""
        raise ValueError(f"{path}, {where(int(missing[0]))}: no text in column {column.name!r}{more}.")
    return column.astype(str).tolist()


def _refuse_repeated_columns(wanted: list[str], path: Path) -> None:
    """A CSV/TSV header naming a column the task reads twice: pandas would rename the second (``text.1``) and the
    run would read the first without a word."""
    if path.suffix.lower() not in (".csv", ".tsv"):
        return  # JSON keys and parquet columns are unique by the time pandas has them
    with path.open(encoding="utf-8-sig", newline="") as handle:
        header = next(csv.reader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ","), [])
    repeated = [name for name in wanted if header.count(name) > 1]
    if repeated:
        positions = [str(i + 1) for i, name in enumerate(header) if name == repeated[0]]
        raise ValueError(
            f"{path}: its header names the column {repeated[0]!r} {len(positions)} times (columns "
            f"{', '.join(positions)}). Name each column once."
        )


@contextmanager
def utf8_named(path: Path) -> Iterator[None]:
    """A decoding error names the file and where in it the first bad byte is (Python's names only the codec, and a
    position within whatever chunk the reader was decoding)."""
    try:
        yield
    except UnicodeDecodeError as error:
        content = path.read_bytes()
        start, reason = error.start, error.reason  # within the chunk being decoded: the file's own position below
        try:
            content.decode("utf-8")
        except UnicodeDecodeError as whole:
            start, reason = whole.start, whole.reason
        line = content.count(b"\n", 0, start) + 1
        raise ValueError(
            f"{path} is not UTF-8 text ({reason} at byte {start}, line {line}). Save it as UTF-8; a file "
            "that starts with the bytes FF FE is UTF-16."
        ) from None


def _read_frame(path: Path) -> pd.DataFrame:
    """The file's rows; a file its format's reader cannot parse is refused naming it (pandas' own message names a
    line or position, never the file)."""
    try:
        return _parsed_frame(path)
    except UnicodeDecodeError:
        raise  # utf8_named says where the bad byte is
    except ValueError as error:  # pandas' ParserError, a JSON decoding error and pyarrow's ArrowInvalid are ValueErrors
        kind = {".jsonl": "JSON lines", ".json": "JSON", ".parquet": "parquet"}.get(path.suffix.lower(), "CSV")
        kind = "TSV" if path.suffix.lower() == ".tsv" else kind
        raise ValueError(f"{path} cannot be read as {kind}: {str(error).strip()}") from None


def _parsed_frame(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    if suffix == ".json":
        try:
            return pd.read_json(path, dtype=False)  # an array of records
        except ValueError:
            return pd.read_json(path, lines=True, dtype=False)  # JSON lines under a .json name
    separator = "\t" if suffix == ".tsv" else ","
    quoting = csv.QUOTE_NONE if suffix == ".tsv" else csv.QUOTE_MINIMAL
    return pd.read_csv(path, sep=separator, quoting=quoting, keep_default_na=False, dtype=str)


def _parse_label(value: str, label_values: tuple[str, ...], path: Path, where: str) -> int | float:
    """A label or score, ``where`` its row is (``line 9``)."""
    if not label_values:
        try:
            score = float(value)
        except ValueError:
            raise ValueError(f"{path}, {where}: score {value!r} is not a number.") from None
        if not math.isfinite(score):  # a NaN label trains a NaN model, which would then be cached
            raise ValueError(f"{path}, {where}: score {value!r} is not a finite number.")
        return score
    try:
        return label_values.index(value)
    except ValueError:
        raise ValueError(
            f"{path}, {where}: label {value!r} is not one of the task's labels {list(label_values)}."
        ) from None


def _require_columns(wanted: list[str], found: list[str], path: Path) -> None:
    missing = [name for name in wanted if name not in found]
    if missing:
        raise ValueError(f"{path} has no column {missing[0]!r}; its columns are {found}.")


def _require_rows(dataset: Dataset, task: TaskSpec, split: str, where: str) -> Dataset:
    if len(dataset) == 0:
        raise ValueError(f"The {split} split of {task.name} ({where}) is empty.")
    return dataset


def _file_fingerprint(path: Path) -> str:
    return f"file:{content_digest(path)}"
