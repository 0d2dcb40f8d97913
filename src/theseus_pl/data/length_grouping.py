"""Batches of similar length, so dynamic padding has little to pad.

With random batches, one long row pads the whole batch: on RTE one row in eight reaches 128 tokens, so nearly
every batch of 32 is padded to 128. Grouping keeps randomness: each epoch shuffles all rows, cuts them into
mega-batches of ``batch_size * group_factor`` rows, sorts each mega-batch by length, cuts it into batches and
shuffles the order of all batches (as Hugging Face Trainer's ``group_by_length``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import Sampler


class LengthGroupedBatchSampler(Sampler[list[int]]):
    def __init__(self, lengths: Sequence[int], batch_size: int, generator: torch.Generator, group_factor: int = 50):
        self.lengths = torch.as_tensor(lengths)
        self.batch_size = batch_size
        self.generator = generator
        self.group_size = batch_size * group_factor

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(len(self.lengths), generator=self.generator)
        batches = []
        for group in order.split(self.group_size):
            by_length = group[self.lengths[group].argsort(descending=True, stable=True)]
            batches.extend(by_length.split(self.batch_size))
        for index in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[index].tolist()
