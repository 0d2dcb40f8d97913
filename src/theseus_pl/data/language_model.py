"""Language-model data: documents tokenised once, split by document, packed into fixed-length windows.

Every method of a comparison is scored on the same held-out windows, so perplexities are comparable token for token:
the split is a pure function of the documents and the seed, and the packing of the tokens. Documents are joined with
the tokenizer's end-of-text token between them (the model learns where a text ends), cut into windows of
``window`` tokens; the last window of a split is padded (``attention_mask`` 0, ``labels`` -100), so every token of a
split is in exactly one window and predicted at most once. The tokenised windows are cached like the GLUE splits
(``cache_entry``): a sweep tokenises once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
from datasets import Dataset, DatasetDict, load_from_disk
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerBase

from theseus_pl.core.settings import number
from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.data.text_corpus import TextSource
from theseus_pl.data.tokenized import default_cache_dir, tokenizer_fingerprint
from theseus_pl.data.training_order import ResumableDataModule, ShuffledSampler

log = logging.getLogger(__name__)

IGNORED = -100  # the label the loss and the perplexity skip (Hugging Face's convention)


def held_out_documents(count: int, fraction: float, seed: int) -> list[int]:
    """The indices (ascending) of the documents held out for evaluation: ``round(count * fraction)`` of them, at least
    one, drawn by ``seed``; a ValueError when that would leave nothing to train on."""
    if not (number(fraction) and 0 < fraction < 1):
        raise ValueError(f"data.held_out={fraction} must be between 0 and 1 (the share of documents held out).")
    held = max(1, round(count * fraction))
    if held >= count:
        raise ValueError(
            f"The text has {count} document(s): holding out {held} leaves none to train on. Give more documents "
            "(files, or rows of a hub dataset), each a separate text."
        )
    return sorted(np.random.default_rng(seed).permutation(count)[:held].tolist())


def pack_windows(documents: list[list[int]], window: int, separator: int, pad: int) -> dict[str, list[list[int]]]:
    """The documents' tokens joined by ``separator``, cut into windows of ``window`` tokens, the last one padded."""
    tokens: list[int] = []
    for document in documents:
        tokens.extend(document)
        tokens.append(separator)
    windows: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
    for start in range(0, len(tokens), window):
        piece = tokens[start : start + window]
        padding = window - len(piece)
        windows["input_ids"].append(piece + [pad] * padding)
        windows["attention_mask"].append([1] * len(piece) + [0] * padding)
        windows["labels"].append(piece + [IGNORED] * padding)
    return windows


def window_problem(window: int, max_positions: int | None) -> str | None:
    """Why windows of ``window`` tokens cannot run through a model of ``max_positions`` positions; None if they can."""
    if window < 2:
        return f"data.window={window} must be at least 2 tokens (a token and the one it predicts)."
    if max_positions is not None and window > max_positions:
        return (
            f"data.window={window} is longer than the model's {max_positions} positions "
            f"(max_position_embeddings): give data.window={max_positions} or less."
        )
    return None


def tokenized_windows(
    source: TextSource,
    tokenizer: PreTrainedTokenizerBase,
    window: int,
    held_out: float | None,
    seed: int,
    cache_dir: Path | None = None,
) -> DatasetDict:
    """The ``train`` and ``validation`` windows of ``source``, from the cache when they are there; with ``held_out``
    None only ``validation``, of every document (a text scored, never trained on)."""
    key = {
        "tokenizer": tokenizer_fingerprint(tokenizer),
        "source": source.fingerprint(),
        "window": window,
        "held_out": held_out,
        "seed": seed,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = (cache_dir or default_cache_dir()) / f"lm-windows-{digest}"

    def build(staging: Path) -> None:
        documents = source.documents()
        held = set(range(len(documents)) if held_out is None else held_out_documents(len(documents), held_out, seed))
        separator = tokenizer.eos_token_id
        if separator is None:
            raise ValueError("The tokenizer has no end-of-text token (eos_token) to put between documents.")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else separator
        encoded = tokenizer(documents, add_special_tokens=False)["input_ids"]
        splits = {"validation": [ids for i, ids in enumerate(encoded) if i in held]}
        if held_out is not None:
            splits["train"] = [ids for i, ids in enumerate(encoded) if i not in held]
        for name, documents_ids in splits.items():
            tokens = sum(len(ids) + 1 for ids in documents_ids)
            if tokens < window:
                raise ValueError(
                    f"The {name} split of {source.describe()} has {tokens} tokens, fewer than one window of {window}: "
                    "give more text or a shorter data.window."
                )
        DatasetDict(
            {name: Dataset.from_dict(pack_windows(ids, window, separator, pad)) for name, ids in splits.items()}
        ).save_to_disk(str(staging))

    def load(folder: Path) -> DatasetDict:
        return load_from_disk(str(folder))

    windows, built = load_or_build(path, load, build, f"tokenised windows of {source.describe()}")
    if built:
        counts = " and ".join(f"{len(rows)} {split} windows" for split, rows in windows.items())
        log.info("Tokenised %s: %s of %d tokens", source.describe(), counts, window)
    return windows


def collate_windows(rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    """Windows are all ``window`` tokens long: stacking is all a batch needs."""
    return {name: torch.tensor([row[name] for row in rows]) for name in rows[0]}


def window_loader(windows: Dataset, batch_size: int, num_workers: int = 0, **kwargs: Any) -> DataLoader:
    """Batches of ``windows`` (in order unless a ``sampler`` is given)."""
    return DataLoader(
        windows.with_format(None),
        batch_size=batch_size,
        collate_fn=collate_windows,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        **kwargs,
    )


class LanguageModelingDataModule(ResumableDataModule):
    """Fixed-length windows of a text source for a causal language model: shuffled training windows in an order fixed
    by ``seed`` (the run's: resumable mid-epoch), held-out windows in order. The documents are split by
    ``split_seed``, apart from the run's seed, so runs of different seeds are scored on the same held-out windows."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        source: TextSource,
        window: int = 128,
        batch_size: int = 8,
        eval_batch_size: int | None = None,
        held_out: float = 0.1,
        seed: int = 0,
        split_seed: int = 0,
        max_eval_windows: int | None = None,
        cache_dir: Path | None = None,
        num_workers: int = 0,
    ) -> None:
        super().__init__()
        problem = window_problem(window, None)
        if problem:
            raise ValueError(problem)
        self.tokenizer, self.source, self.window = tokenizer, source, window
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.held_out, self.seed, self.split_seed = held_out, seed, split_seed
        self.max_eval_windows = max_eval_windows
        self.cache_dir, self.num_workers = cache_dir, num_workers
        self.splits: dict[str, Dataset] = {}

    def load(self) -> DatasetDict:
        return tokenized_windows(
            self.source, self.tokenizer, self.window, self.held_out, self.split_seed, self.cache_dir
        )

    def prepare_data(self) -> None:
        self.load()

    def setup(self, stage: str | None = None) -> None:
        windows = self.load()
        self.splits["train"] = windows["train"]
        validation = windows["validation"]
        if self.max_eval_windows is not None and len(validation) > self.max_eval_windows:
            validation = validation.select(range(self.max_eval_windows))  # the first ones: the same for every run
        self.splits["validation"] = validation

    def train_dataloader(self) -> DataLoader:
        train = self.splits["train"]
        order = self.resume_order(ShuffledSampler(len(train), self.seed))
        return window_loader(train, self.batch_size, self.num_workers, sampler=order)

    def val_dataloader(self) -> DataLoader:
        return window_loader(self.splits["validation"], self.eval_batch_size, self.num_workers)
