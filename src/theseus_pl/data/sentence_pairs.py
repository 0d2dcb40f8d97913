"""Labelled sentence pairs for a sentence-embedding run (``data=sentence_pairs``): a GLUE similarity task's training
pairs with their gold scores, the labels of sentence-transformers' CoSENT loss, where ``data=sentences`` has the
teacher's vectors.

A batch holds ``n`` pairs as ``2n`` sentences, the first sentences of the pairs then the second ones, padded together,
so one forward pass (one Theseus gate draw) embeds both sides; ``labels`` are the ``n`` gold scores. Held-out pairs,
a fixed draw from the training file, are never trained on: validation scores them as STS-B dev scores the finished
run (Spearman of the pairs' cosine similarities). No dev set's sentence is read here: a training pair holding one of
the sentences the run is scored on is dropped.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset
from transformers import PreTrainedTokenizerBase

from theseus_pl.data.sentences import check_held_out
from theseus_pl.data.sources import Source
from theseus_pl.data.tasks import glue_task
from theseus_pl.data.training_order import SentenceSplitsDataModule


@dataclass(frozen=True)
class Pairs:
    """Sentence pairs and their gold similarity scores, in order."""

    first: list[str]
    second: list[str]
    scores: list[float]

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def sentences(self) -> list[str]:
        """Every sentence of the pairs, each distinct one once."""
        return list(dict.fromkeys([*self.first, *self.second]))

    def sentences_not_in(self, trained: Pairs) -> list[str]:
        """The sentences of these pairs that no pair of ``trained`` holds: what fidelity to the teacher is measured on.
        Holding out pairs does not hold out their sentences: STS-B repeats sentences across pairs (with the shipped
        experiment's split, 95 of the 991 held-out pairs' sentences are in training pairs)."""
        seen = set(trained.sentences)
        return [sentence for sentence in self.sentences if sentence not in seen]


def glue_pairs(source: Source, task_name: str, leaving_out: Collection[str] = ()) -> Pairs:
    """The training pairs of a GLUE task with two sentences and a float score (STS-B), less any pair holding a
    sentence of ``leaving_out`` (the dev sentences the run is scored on); refused naming the task otherwise."""
    task = glue_task(task_name)
    if len(task.text_columns) != 2 or not task.is_regression:
        raise ValueError(
            f"data.pairs={task_name}: its rows are no sentence pairs with a similarity score; name STS-B (or train "
            "on unlabelled sentences with data=sentences)."
        )
    rows = source.read(task, "train")
    first, second = task.text_columns
    kept = [
        (one.strip(), two.strip(), float(score))
        for one, two, score in zip(rows[first], rows[second], rows["label"], strict=True)
        if one and two and one.strip() not in leaving_out and two.strip() not in leaving_out
    ]
    return Pairs([row[0] for row in kept], [row[1] for row in kept], [row[2] for row in kept])


def held_out_pairs(pairs: Pairs, held_out: int, seed: int) -> tuple[Pairs, Pairs]:
    """(training, held-out) pairs: ``held_out`` drawn by ``seed``, the rest in the same draw's order."""
    check_held_out(held_out, "pairs")
    if held_out >= len(pairs):
        raise ValueError(
            f"data.held_out={held_out} leaves no training pair of the {len(pairs)} there are: hold out fewer."
        )
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)

    def picked(indices: Sequence[int]) -> Pairs:
        return Pairs([pairs.first[i] for i in indices], [pairs.second[i] for i in indices],
                     [pairs.scores[i] for i in indices])  # fmt: skip

    return picked(order[held_out:]), picked(order[:held_out])


class TokenizedPairs(Dataset):
    """Pairs as token ids of both sentences and the gold score."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, pairs: Pairs, max_length: int) -> None:
        def rows(texts: list[str]) -> list[dict[str, list[int]]]:
            encoded = tokenizer(texts, truncation=True, max_length=max_length)
            return [{name: values[i] for name, values in encoded.items()} for i in range(len(texts))]

        self.first, self.second, self.scores = rows(pairs.first), rows(pairs.second), pairs.scores

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def lengths(self) -> list[int]:
        """The longer sentence of each pair: what pads its batch."""
        return [
            max(len(one["input_ids"]), len(two["input_ids"])) for one, two in zip(self.first, self.second, strict=True)
        ]

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"first": self.first[index], "second": self.second[index], "score": self.scores[index]}


class SentencePairDataModule(SentenceSplitsDataModule):
    """Tokenised training and held-out pairs; a batch is its pairs' ``2n`` sentences padded together (first sentences,
    then second ones) with the ``n`` scores as ``labels``; training batches of similar lengths (``group_by_length``)
    in an order fixed by the seed, resumable mid-epoch. The ``batch_size`` given counts sentences, as
    ``data=sentences``'s does, so the two kinds of training text compare at equal sentences a step; the attribute,
    what the loader and the resumed order count, is pairs."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        train: Pairs,
        held_out: Pairs,
        max_length: int = 128,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        group_by_length: bool = True,
        seed: int = 42,
    ) -> None:
        super().__init__()
        if batch_size % 2:
            raise ValueError(f"data.batch_size={batch_size}: a batch of pairs holds an even number of sentences.")
        self.tokenizer = tokenizer
        self.pairs = {"train": train, "validation": held_out}
        self.max_length = max_length
        self.batch_size = batch_size // 2  # pairs: what the loader and the resumed order count
        self.eval_batch_size = max(1, (eval_batch_size or batch_size) // 2)
        self.group_by_length = group_by_length
        self.seed = seed
        self.splits = {name: TokenizedPairs(tokenizer, split, max_length) for name, split in self.pairs.items()}

    def collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = dict(self.tokenizer.pad([row["first"] for row in rows] + [row["second"] for row in rows],
                                        return_tensors="pt"))  # fmt: skip
        batch["labels"] = torch.tensor([row["score"] for row in rows], dtype=torch.float32)
        return batch
