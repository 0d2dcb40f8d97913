"""The settings a sentence-embedding run reads, typed (:mod:`~theseus_pl.app.config.schema`): the groups every
kind shares and its sentences (``conf/data/sentences.yaml``) or sentence pairs (``conf/data/sentence_pairs.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from theseus_pl.app.config.schema import RunConfig


@dataclass
class SentenceDataConfig:
    """Sentences to match the predecessor's vectors on (``train_tasks``, ``corpora``), or labelled pairs to train
    on (``pairs``); scored on STS-B's dev pairs (the GLUE files or the hub), ``held_out`` of them kept out."""

    kind: str = MISSING
    glue_dir: str | None = MISSING
    hub_dataset: str | None = MISSING
    train_tasks: list[str] = MISSING  # data=sentences
    corpora: list[str] = MISSING  # data=sentences
    max_sentences: int | None = None  # data=sentences
    pairs: str | None = None  # data=sentence_pairs
    held_out: int = MISSING
    split_seed: int = MISSING
    max_length: int = MISSING
    batch_size: int = MISSING
    eval_batch_size: int = MISSING
    group_by_length: bool = MISSING


@dataclass
class EmbeddingModelConfig(RunConfig):
    """A sentence-embedding run's settings."""

    data: SentenceDataConfig = field(default_factory=SentenceDataConfig)
