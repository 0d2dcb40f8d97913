"""The LightningDataModule of a text task: a GLUE task (local files or the hub), the demo's Rotten Tomatoes, or the
user's own files: one class, whatever the source."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cached_property
from pathlib import Path

import numpy as np
from datasets import Dataset
from torch.utils.data import DataLoader
from transformers import AutoTokenizer, DataCollatorWithPadding, PreTrainedTokenizerBase

from theseus_pl.data.sources import FilesSource, GlueDirSource, HubSource, Source
from theseus_pl.data.tasks import TaskSpec, custom_task, glue_task, is_glue_task, name_from_files
from theseus_pl.data.tokenized import tokenized_split, tokenizer_fingerprint
from theseus_pl.data.training_order import LengthGroupedSampler, ResumableDataModule, ShuffledSampler

log = logging.getLogger(__name__)


def resolve_task(
    task: str | None,
    files: Mapping[str, str] | None = None,
    text_columns: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
    regression: bool = False,
    metric: str | None = None,
    max_length: int | None = None,
) -> TaskSpec:
    """A GLUE task by name, or — given ``text_columns`` — a task on the user's own data, named ``task`` or, when
    that is None, after its files (:func:`~theseus_pl.data.tasks.name_from_files`).

    Data read from files is a GLUE task only when ``task`` says so and nothing redefines its columns or labels: a
    GLUE name on a task of the user's own making would put GLUE's name on the run's folder, W&B run and model card.
    """
    own = bool(text_columns or labels or regression)
    if task is None:
        if not files:
            raise ValueError(
                "No data named: give data.task=GLUE_TASK (e.g. RTE), your own files with data.files={train: "
                "train.csv, validation: dev.csv} and data.text_columns, or an experiment (+experiment=demo)."
            )
        if not text_columns:
            raise ValueError(
                "data.files gives your own data: also give data.text_columns (the one or two text columns) and "
                "data.labels (the label values in class order) or data.regression=true."
            )
        task = name_from_files(files)
    if is_glue_task(task) and own:
        set_here = ", ".join(name for name, value in (("data.text_columns", text_columns), ("data.labels", labels),
                                                       ("data.regression", regression)) if value)  # fmt: skip
        raise ValueError(
            f"data.task={task} is a GLUE task, with GLUE's columns and labels, but {set_here} describe your own "
            f"data. Which wins is not guessed: to read {'data.files' if files else 'the data'} as {task}, drop "
            f"{set_here}; for your own data, name it (data.task=NAME) or leave data.task out (null: the name "
            "comes from the files)."
        )
    if text_columns:
        spec = custom_task(task, text_columns, labels, regression, metric)
    elif is_glue_task(task) or not files:
        spec = glue_task(task)
        if metric is not None:  # read only for data of your own: on a GLUE task it was dropped unread
            raise ValueError(
                f"data.metric={metric} chooses how your own data is scored; {spec.name} is scored by its own "
                f"metric ({spec.metric}). Drop data.metric."
            )
    else:
        raise ValueError(f"data.task={task} is not a GLUE task: with data.files, also give data.text_columns.")
    if max_length is not None:
        spec = replace(spec, max_length=max_length)
    return spec


def resolve_source(
    task: TaskSpec, glue_dir: str | None, files: Mapping[str, str] | None, label_column: str, hub_dataset: str
) -> Source:
    if files and glue_dir:
        raise ValueError("Give data.files or data.glue_dir, not both.")
    if files:
        return FilesSource(files, label_column)
    if glue_dir:
        return GlueDirSource(glue_dir)
    return HubSource(hub_dataset)


def sample_rows(dataset: Dataset, limit: int | None, seed: int) -> Dataset:
    """At most ``limit`` rows, drawn without replacement by ``seed`` and kept in file order."""
    if limit is None or limit >= len(dataset):
        return dataset
    if limit < 1:
        raise ValueError(f"A sample size must be >= 1, got {limit}.")
    chosen = np.random.default_rng(seed).choice(len(dataset), size=limit, replace=False)
    return dataset.select(np.sort(chosen))


def longest_first(dataset: Dataset) -> list[int]:
    """Row indices by decreasing token count (ties in file order); the first batch is the largest one."""
    lengths = np.array([len(ids) for ids in dataset["input_ids"]])
    return np.argsort(-lengths, kind="stable").tolist()


class TextTaskDataModule(ResumableDataModule):
    """Tokenised, cached, dynamically padded splits of one task.

    Source: ``source`` if given (e.g. the demo's Rotten Tomatoes), else ``files`` (own data), else ``glue_dir``
    (classic GLUE layout), else the hub. Batches are
    dicts for a Hugging Face model: ``input_ids``, ``attention_mask`` (``token_type_ids``), ``labels``; each
    padded to its own longest row, not to ``max_length``; ``group_by_length`` also batches rows of similar length
    together, which removes most of the remaining padding. ``pad_to_max_length`` pads every batch to ``max_length``
    instead: fixed shapes, for a compiled model that should not see a new shape per batch, and for benchmarks.
    """

    def __init__(
        self,
        task: str | None,
        tokenizer: str | PreTrainedTokenizerBase,
        glue_dir: str | None = None,
        files: Mapping[str, str] | None = None,
        text_columns: Sequence[str] | None = None,
        label_column: str = "label",
        labels: Sequence[str] | None = None,
        regression: bool = False,
        metric: str | None = None,
        hub_dataset: str = "nyu-mll/glue",
        source: Source | None = None,
        max_length: int | None = None,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        max_train_samples: int | None = None,
        max_eval_samples: int | None = None,
        group_by_length: bool = False,
        pad_to_max_length: bool = False,
        seed: int = 42,
        cache_dir: str | Path | None = None,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        self.task = resolve_task(task, files, text_columns, labels, regression, metric, max_length)
        self.source = source or resolve_source(self.task, glue_dir, files, label_column, hub_dataset)
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer) if isinstance(tokenizer, str) else tokenizer
        if self.tokenizer.pad_token is None and self.tokenizer.eos_token is not None:
            # A decoder's (GPT-2, most Llamas): rows of a batch are padded with its end-of-text token, as its
            # classifier is told (theseus_pl.app.predecessors.classifier.padding_of).
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.max_train_samples = max_train_samples
        self.max_eval_samples = max_eval_samples
        self.group_by_length = group_by_length
        self.pad_to_max_length = pad_to_max_length
        self.seed = seed
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else None
        self.num_workers = num_workers
        padding = {"padding": "max_length", "max_length": self.task.max_length} if pad_to_max_length else {}
        self.collate = DataCollatorWithPadding(self.tokenizer, **padding)
        self.splits: dict[str, Dataset] = {}
        self.test_indices: dict[str, list[int]] = {}
        self._checked_eval_splits: set[str] = set()

    @classmethod
    def from_files(
        cls,
        files: Mapping[str, str | Path],
        text_columns: Sequence[str],
        labels: Sequence[str] | None = None,
        *,
        tokenizer: str | PreTrainedTokenizerBase,
        name: str | None = None,
        **settings: object,
    ) -> TextTaskDataModule:
        """Your own data: one file per split (``train``, ``validation``; csv, tsv, json, jsonl or parquet), the one
        or two ``text_columns``, and the ``labels`` as the files write them, in class order (None: a regression on
        a numeric ``label`` column). The task is named ``name``, else after the files (``reviews/train.csv`` →
        ``reviews``); accuracy scores a classification, Pearson/Spearman a regression (``metric=`` to choose).
        ``settings`` are the constructor's other options (``batch_size``, ``max_length``, ``label_column``, …)."""
        files = {split: str(path) for split, path in files.items()}
        return cls(name, tokenizer, files=files, text_columns=text_columns, labels=labels,
                   regression=labels is None, **settings)  # fmt: skip

    @cached_property
    def tokenizer_id(self) -> str:
        return tokenizer_fingerprint(self.tokenizer)

    @cached_property
    def data_fingerprints(self) -> list[str]:
        """The source's fingerprint of each split the run reads (training, then the scored ones): what a cache entry
        made from them, or a checkpoint trained on them, is keyed by (read once: a file's is a hash of its bytes)."""
        return [self.source.fingerprint(self.task, split) for split in ("train", *self.task.eval_splits)]

    def load(self, split: str) -> Dataset:
        """One split, tokenised (from the cache when it is there), unpadded."""
        return tokenized_split(
            self.source, self.task, split, self.tokenizer, self.task.max_length, self.cache_dir, self.tokenizer_id
        )

    def prepare_data(self) -> None:
        for split in ("train", *self.task.eval_splits):
            self.load(split)

    def setup(self, stage: str | None = None) -> None:
        if stage in (None, "fit"):
            self.splits["train"] = sample_rows(self.load("train"), self.max_train_samples, self.seed)
        if stage in (None, "fit", "validate"):
            for split in self.task.eval_splits:
                self.splits[split] = sample_rows(self.load(split), self.max_eval_samples, self.seed)
                self._warn_if_one_class(split)
        if stage in ("test", "predict"):
            for split in self.task.test_splits:
                dataset = self.load(split)
                if "idx" in dataset.column_names:
                    self.test_indices[split] = dataset["idx"]
                    dataset = dataset.remove_columns("idx")
                self.splits[split] = dataset

    def split(self, name: str) -> Dataset:
        """The split ``name`` as set up (sampled), its stage set up on first use: where a run loads its predecessor
        (given, or from the cache) instead of fine-tuning it, nothing has read the data before the run counts its
        batches, calibrates or times a model on it."""
        if name not in self.splits:
            self.setup("fit" if name == "train" else "validate" if name in self.task.eval_splits else "test")
        return self.splits[name]

    def _warn_if_one_class(self, split: str) -> None:
        """A dev set of one class scores a constant predictor 100 on accuracy, F1 and MCC: say so, once."""
        if self.task.is_regression or split in self._checked_eval_splits:
            return
        self._checked_eval_splits.add(split)
        classes = set(self.splits[split]["labels"])
        if len(classes) == 1:
            (only,) = classes
            log.warning(
                "The %s split of %s (%d rows) holds only the class %r: its scores say nothing about the model (a "
                "constant predictor scores 100). Use more dev rows (data.max_eval_samples) or check the file.",
                split, self.task.name, len(self.splits[split]), self.task.label_names[only],
            )  # fmt: skip

    def train_dataloader(self) -> DataLoader:
        """Shuffled rows (or length-grouped batches), in an order fixed by the seed and the epoch; after a resume,
        from the batch the interrupted run would have trained on next."""
        train = self.split("train")
        if self.group_by_length:
            order = LengthGroupedSampler([len(ids) for ids in train["input_ids"]], self.batch_size, self.seed)
        else:
            order = ShuffledSampler(len(train), self.seed)
        order = self.resume_order(order)
        return self._loader(train, self.batch_size, sampler=order)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """Dev rows longest first: every metric ignores row order, and sorted batches carry almost no padding
        (Rotten Tomatoes: 27 tokens a row on average, 52 a batch when drawn at random)."""
        return self._loaders(self.task.eval_splits, by_length=True)

    def predict_dataloader(self) -> DataLoader | list[DataLoader]:
        return self._loaders(self.task.test_splits, by_length=False)  # predictions are written in file order

    def _loaders(self, splits: Sequence[str], by_length: bool) -> DataLoader | list[DataLoader]:
        datasets = [self.split(split) for split in splits]
        loaders = [
            self._loader(dataset, self.eval_batch_size, sampler=longest_first(dataset) if by_length else None)
            for dataset in datasets
        ]
        return loaders[0] if len(loaders) == 1 else loaders

    def _loader(self, dataset: Dataset, batch_size: int, **kwargs: object) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=batch_size,
            collate_fn=self.collate,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            **kwargs,
        )
