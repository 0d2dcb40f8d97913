"""Tokenise a split once and keep it on disk: every later run of a sweep loads it in milliseconds.

The cache key holds everything that determines the result: the tokenizer's full definition, the task's
columns, the source's files (their size and SHA-256, wherever they lie) or hub id, the split and the max length.
Entries are checked, rebuilt when damaged and built by one job at a time (``cache_entry``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from datasets import Dataset, load_from_disk
from transformers import PreTrainedTokenizerBase

from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.data.sources import Source
from theseus_pl.data.tasks import TaskSpec


def default_cache_dir() -> Path:
    return Path(os.environ.get("THESEUS_PL_CACHE", Path.home() / ".cache" / "theseus_pl")) / "tokenized"


# What the tokenizer's own config (tokenizer_config.json) sets beside its backend's definition: two tokenizers of one
# vocabulary whose end-of-text token differs (SmolLM2's <|endoftext|>, its Instruct model's <|im_end|>) put another
# token between a decoder's documents, and one truncating on the left keeps other tokens.
TOKENIZER_SETTINGS = (
    "bos_token", "eos_token", "pad_token", "sep_token", "cls_token", "truncation_side", "padding_side",
)  # fmt: skip


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A hash of the tokenizer's whole definition (vocabulary, normaliser, special tokens and which is which, the
    sides it truncates and pads), not of its name."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # Truncation and padding are per-call state that the tokenizer keeps from its last use: not identity.
        definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in {"truncation", "padding"}}
    else:
        definition = tokenizer.get_vocab()
    settings = {name: str(getattr(tokenizer, name, None)) for name in TOKENIZER_SETTINGS}
    definition = json.dumps([definition, settings], sort_keys=True)
    return hashlib.sha256(f"{type(tokenizer).__name__}:{definition}".encode()).hexdigest()[:16]


def tokenized_split(
    source: Source,
    task: TaskSpec,
    split: str,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    cache_dir: Path | None = None,
    tokenizer_id: str | None = None,
) -> Dataset:
    """The split as ``input_ids``, ``attention_mask`` (``token_type_ids``) and ``labels`` or ``idx``, unpadded.

    ``tokenizer_id`` is :func:`tokenizer_fingerprint` of ``tokenizer`` when the caller already has it: hashing a
    tokenizer takes longer than loading a cached split.
    """
    key = {
        "tokenizer": tokenizer_id or tokenizer_fingerprint(tokenizer),
        "task": [task.name, list(task.text_columns), list(task.label_names)],
        "source": source.fingerprint(task, split),
        "split": split,
        "max_length": max_length,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = (cache_dir or default_cache_dir()) / f"{task.name}-{split}-{digest}"

    def build(staging: Path) -> None:
        encoded = source.read(task, split).map(
            lambda rows: tokenizer(*(rows[c] for c in task.text_columns), truncation=True, max_length=max_length),
            batched=True,
            remove_columns=list(task.text_columns),
            desc=f"Tokenising {task.name} {split}",
        )
        if "label" in encoded.column_names:
            encoded = encoded.rename_column("label", "labels")
        encoded.save_to_disk(str(staging))

    def load(folder: Path) -> Dataset:
        return load_from_disk(str(folder))

    dataset, _ = load_or_build(path, load, build, f"tokenised {task.name} {split} split")
    return dataset
