"""Sentences for a sentence-embedding run: unlabelled English sentences from GLUE training sets and from the text
corpora shipped offline, each paired with its teacher's sentence vector, the target the student learns
(sentence-transformers' distillation recipe).

The sentences are every text column of the named tasks' training splits, each distinct sentence once, in file order,
then the sentences of the named corpora (:data:`~theseus_pl.data.text_corpus.CORPORA`, split by
:func:`split_sentences`); a fixed draw (``split_seed``) holds some out, never trained on: they are what validation
and the record's fidelity are measured on. No dev set's sentence is read here: STS-B dev scores the finished run
(and the run drops any of its sentences a corpus happens to hold).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Subset
from transformers import PreTrainedTokenizerBase

from theseus_pl.core.settings import optional_positive_int, positive_int
from theseus_pl.data.sources import Source
from theseus_pl.data.tasks import glue_task
from theseus_pl.data.text_corpus import CORPORA
from theseus_pl.data.training_order import SentenceSplitsDataModule


def glue_sentences(source: Source, tasks: Sequence[str], split: str = "train") -> list[str]:
    """Each distinct non-empty sentence of the tasks' ``split`` (every text column: both sentences of a pair), in
    file order, task after task."""
    seen: dict[str, None] = {}
    for name in tasks:
        task = glue_task(name)
        rows = source.read(task, split)
        for column in task.text_columns:
            seen.update((text.strip(), None) for text in rows[column] if text and text.strip())
    return list(seen)


SPEAKER = re.compile(r"^[A-Z][A-Za-z .'-]{0,40}: ")  # "BARACK OBAMA: ", "Quijano: " (transcripts' speaker names)
ASIDE = re.compile(r"\([^)]*\)")  # "(Applause.)": a transcript's stage directions
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'\u2018\u201cA-Z])")  # a full stop, then a capital or an opening quote
MIN_WORDS = 4  # shorter pieces ("Thank you.", "Four more years!") say little of a sentence encoder


def split_sentences(document: str) -> list[str]:
    """The sentences of a corpus document, line by line: the speaker's name and stage directions of a transcript
    left out, each line cut after a full stop, question or exclamation mark followed by a capital; a piece of fewer
    than :data:`MIN_WORDS` words dropped. A rule, not a parser: it keeps "Mr. Smith" together only by luck, which is
    enough for training text."""
    sentences = []
    for line in document.splitlines():
        text = ASIDE.sub("", SPEAKER.sub("", line.strip())).strip()
        sentences += [piece.strip() for piece in SENTENCE_END.split(text) if len(piece.split()) >= MIN_WORDS]
    return sentences


def corpus_sentences(names: Sequence[str]) -> list[str]:
    """Each distinct sentence of the named corpora (:data:`~theseus_pl.data.text_corpus.CORPORA`, offline), in
    document order, corpus after corpus; an unknown name is refused naming the ones there are."""
    unknown = [name for name in names if name not in CORPORA]
    if unknown:
        raise ValueError(f"data.corpora: {', '.join(unknown)} is no corpus here: name any of {', '.join(CORPORA)}.")
    seen: dict[str, None] = {}
    for name in names:
        for document in CORPORA[name]().documents():
            seen.update((sentence, None) for sentence in split_sentences(document))
    return list(seen)


def held_out_split(
    sentences: Sequence[str], held_out: int, limit: int | None, seed: int
) -> tuple[list[str], list[str]]:
    """(training, held-out) sentences: ``held_out`` drawn by ``seed`` first, then at most ``limit`` of the rest (None:
    all) in the same draw's order, so a smaller budget's sentences are a prefix of a larger one's."""
    if not sentences:
        raise ValueError("data.train_tasks and data.corpora name no sentence: there is nothing to train on.")
    check_held_out(held_out, "sentences")
    if not optional_positive_int(limit):
        raise ValueError(f"data.max_sentences={limit!r} must be null (every sentence) or a whole number, at least 1.")
    if held_out >= len(sentences):
        raise ValueError(
            f"data.held_out={held_out} leaves no training sentence of the {len(sentences)} there are: hold out fewer."
        )
    order = list(sentences)
    random.Random(seed).shuffle(order)
    kept, train = order[:held_out], order[held_out:]
    return (train[:limit] if limit is not None else train), kept


def check_held_out(held_out: object, unit: str) -> None:
    """A ValueError unless ``held_out`` is a count of ``unit`` to hold out (a decoder LM's is a share instead)."""
    if not positive_int(held_out):
        raise ValueError(f"data.held_out={held_out!r} must be a whole number of {unit}, at least 1: held out from "
                         "training, they are what validation and the record's fidelity are measured on.")  # fmt: skip


class TokenizedSentences(Dataset):
    """Sentences as token ids, each with its target vector once :meth:`SentenceDataModule.set_targets` gave them.
    Held in lists and a tensor, not a ``datasets.Dataset``: adding 384 numbers a row to one costs it seconds of
    hashing for every thousand sentences."""

    def __init__(self, encoded: dict[str, list[list[int]]]) -> None:
        self.encoded = encoded
        self.targets: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.encoded["input_ids"])

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids in self.encoded["input_ids"]]

    def __getitem__(self, index: int) -> dict[str, Any]:
        row: dict[str, Any] = {name: values[index] for name, values in self.encoded.items()}
        if self.targets is not None:
            row["labels"] = self.targets[index]
        return row


class SentenceDataModule(SentenceSplitsDataModule):
    """Tokenised training and held-out sentences, with their teacher vectors as ``labels`` once
    :meth:`set_targets` gave them; batches padded to their longest sentence, training batches of similar lengths
    (``group_by_length``) in an order fixed by the seed, resumable mid-epoch."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        train: Sequence[str],
        held_out: Sequence[str],
        max_length: int = 128,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        group_by_length: bool = True,
        seed: int = 42,
    ) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.texts = {"train": list(train), "validation": list(held_out)}
        self.max_length = max_length
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.group_by_length = group_by_length
        self.seed = seed
        self.splits = {
            name: TokenizedSentences(dict(tokenizer(texts, truncation=True, max_length=max_length)))
            for name, texts in self.texts.items()
        }

    def collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Token ids padded to the batch's longest sentence; the target vectors stacked."""
        targets = [row.pop("labels") for row in rows if "labels" in row]
        batch = dict(self.tokenizer.pad(rows, return_tensors="pt"))
        if targets:
            batch["labels"] = torch.stack(targets)
        return batch

    def set_targets(self, split: str, vectors: torch.Tensor) -> None:
        """The teacher's sentence vectors of ``split``'s sentences, in their order: the batches' ``labels``."""
        dataset = self.splits[split]
        if len(vectors) != len(dataset):
            raise ValueError(f"{len(vectors)} vectors for the {len(dataset)} {split} sentences.")
        dataset.targets = vectors.float()

    def by_length(self, split: str) -> tuple[DataLoader, torch.Tensor]:
        """``split``'s sentences longest first, in evaluation batches (little padding: what the teacher's vectors are
        made from), and their order: row ``i`` of the loader's output is sentence ``order[i]``."""
        dataset = self.splits[split]
        order = torch.tensor(dataset.lengths).argsort(descending=True, stable=True)
        loader = DataLoader(Subset(dataset, order.tolist()), batch_size=self.eval_batch_size, collate_fn=self.collate)
        return loader, order
