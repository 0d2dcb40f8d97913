"""The order of training rows, a pure function of the seed, the epoch and where in the epoch a run is.

A resumed run must see the batches the interrupted run would have seen next. PyTorch's ``RandomSampler`` draws each
epoch from a generator that carries on from the previous epoch, and Lightning restores a loader's place mid-epoch
only through the loader's ``load_state_dict``, which it skips when ``configure_optimizers`` asks for
``trainer.estimated_stepping_batches`` (Lightning issue 20550; ours does). So these samplers shuffle epoch ``e``
with a generator seeded ``seed + e`` (as PyTorch's ``DistributedSampler`` does) and can be told to begin at any row
of any epoch (:meth:`EpochSeededSampler.start_at`); :class:`ResumableDataModule` keeps the count in checkpoints and
tells its sampler. Both samplers yield row indices: a ``DataLoader`` with ``batch_size`` cuts them into the batches.
Under DDP each process's sampler yields its own share of the epoch, the rows Lightning's distributed sampler would
give it (the epoch padded to a multiple of the processes, every process's n-th row), and so is a ``DistributedSampler``,
which Lightning leaves as it is: wrapped, a resumed epoch's shorter order crashed its wrapper (an IndexError).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


class EpochSeededSampler(DistributedSampler):
    """Each pass is the next epoch, unless Lightning's ``set_epoch`` names it; ``start_at`` skips into one. Under DDP
    (a process group started), this process's share of it (``num_samples`` rows)."""

    def __init__(self, num_rows: int, seed: int) -> None:
        started = dist.is_available() and dist.is_initialized()
        processes, rank = (dist.get_world_size(), dist.get_rank()) if started else (1, 0)
        super().__init__(range(num_rows), num_replicas=processes, rank=rank, shuffle=False)  # num_samples, total_size
        self.num_rows = num_rows
        self.seed = seed
        self.epoch = 0
        self._skip = 0

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def start_at(self, epoch: int, rows_done: int) -> None:
        """Make the next pass epoch ``epoch`` without the first ``rows_done`` rows of this process's share."""
        self.epoch, self._skip = epoch, rows_done

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        skip, self._skip = self._skip, 0
        self.epoch += 1
        order = self.order(generator).tolist()
        if self.total_size > self.num_rows:  # padded with its first rows, as DistributedSampler pads
            order += (order * -(-self.total_size // self.num_rows))[: self.total_size - self.num_rows]
        yield from order[self.rank + skip * self.num_replicas :: self.num_replicas]

    def order(self, generator: torch.Generator) -> torch.Tensor:
        """One epoch's row indices."""
        raise NotImplementedError


class ShuffledSampler(EpochSeededSampler):
    def order(self, generator: torch.Generator) -> torch.Tensor:
        return torch.randperm(self.num_rows, generator=generator)


class LengthGroupedSampler(EpochSeededSampler):
    """Batches of similar length, so dynamic padding has little to pad.

    With random batches, one long row pads the whole batch: on RTE one row in eight reaches 128 tokens, so nearly
    every batch of 32 is padded to 128. Grouping keeps randomness: each epoch shuffles all rows, cuts them into
    mega-batches of ``batch_size * group_factor`` rows, sorts each mega-batch by length, cuts it into batches and
    shuffles the order of the batches (as Hugging Face Trainer's ``group_by_length``). The one short batch comes
    last, so that a loader cutting the indices into ``batch_size`` pieces gets exactly these batches.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int, group_factor: int = 50) -> None:
        super().__init__(len(lengths), seed)
        self.lengths = torch.as_tensor(lengths)
        self.batch_size = batch_size
        self.group_size = batch_size * group_factor

    def order(self, generator: torch.Generator) -> torch.Tensor:
        rows = torch.randperm(self.num_rows, generator=generator)
        batches = []
        for group in rows.split(self.group_size):
            batches.extend(group[self.lengths[group].argsort(descending=True, stable=True)].split(self.batch_size))
        full = [batch for batch in batches if len(batch) == self.batch_size]
        short = [batch for batch in batches if len(batch) < self.batch_size]
        shuffled = [full[i] for i in torch.randperm(len(full), generator=generator).tolist()]
        return torch.cat(shuffled + short)


class ResumableDataModule(pl.LightningDataModule):
    """A data module whose training order resumes mid-epoch: every checkpoint records how many training batches the
    run has consumed, and the next training loader's sampler starts after them."""

    batch_size: int

    def __init__(self) -> None:
        super().__init__()
        self._resume_batches = 0

    def batches_per_epoch(self, rows: int) -> int:
        """Training batches in an epoch of ``rows`` rows, a process's (the last one may be short)."""
        return -(-rows // self.batch_size)

    def resume_order(self, order: EpochSeededSampler) -> EpochSeededSampler:
        """``order`` told where the interrupted run stopped (once: later loaders start at their epoch's start)."""
        done, self._resume_batches = self._resume_batches, 0
        per_epoch = self.batches_per_epoch(order.num_samples)  # this process's batches (each process's as many)
        order.start_at(done // per_epoch, done % per_epoch * self.batch_size)
        return order

    def state_dict(self) -> dict[str, int]:
        """Saved in every checkpoint: how many training batches the run has consumed."""
        trainer = self.trainer
        return {"train_batches_done": trainer.global_step * trainer.accumulate_grad_batches} if trainer else {}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        """Lightning restores this before it asks for the training loader, which then starts where the run was."""
        self._resume_batches = state_dict.get("train_batches_done", 0)


class SentenceSplitsDataModule(ResumableDataModule):
    """The loaders a sentence-embedding run's data modules share: ``splits["train"]`` in batches of similar lengths
    (``group_by_length``, by the split's ``lengths``) or shuffled, in an order fixed by the seed and resumable
    mid-epoch; ``splits["validation"]`` in order. Each subclass says what a row is and how ``collate`` batches rows."""

    splits: dict[str, Any]
    group_by_length: bool
    seed: int
    eval_batch_size: int

    def collate(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        train = self.splits["train"]
        if self.group_by_length:
            order: EpochSeededSampler = LengthGroupedSampler(train.lengths, self.batch_size, self.seed)
        else:
            order = ShuffledSampler(len(train), self.seed)
        return DataLoader(train, batch_size=self.batch_size, collate_fn=self.collate,
                          sampler=self.resume_order(order))  # fmt: skip

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["validation"], batch_size=self.eval_batch_size, collate_fn=self.collate)
