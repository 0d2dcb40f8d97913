"""The settings a task-model run reads, typed (:mod:`~theseus_pl.app.config.schema`): the groups every kind shares
and its data, the task's data module (``conf/data/glue.yaml``), which Hydra builds from the group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from theseus_pl.app.config.schema import RunConfig


@dataclass
class TaskDataConfig:
    """A GLUE task (from the hub or ``glue_dir``), your files (``files``, ``text_columns``, ``labels``), or a source
    of its own (``source``: Rotten Tomatoes); read as :class:`~theseus_pl.data.datamodule.TextTaskDataModule`'s
    arguments."""

    _target_: str = MISSING
    _convert_: str = "all"
    task: str | None = MISSING
    glue_dir: str | None = MISSING
    files: Any = MISSING  # {split: file}, or a list of files
    text_columns: list[str] | None = MISSING
    label_column: str = MISSING
    labels: list[str] | None = MISSING
    regression: bool = MISSING
    metric: str | None = MISSING
    hub_dataset: str | None = MISSING
    max_length: int | None = MISSING
    batch_size: int = MISSING
    eval_batch_size: int = MISSING
    max_train_samples: int | None = MISSING
    max_eval_samples: int | None = MISSING
    group_by_length: bool = MISSING
    pad_to_max_length: bool = MISSING
    seed: int = MISSING
    cache_dir: str = MISSING
    num_workers: int = MISSING
    source: dict[str, Any] | None = None  # a data source Hydra builds (its _target_ and arguments)


@dataclass
class TaskModelConfig(RunConfig):
    """A task-model run's settings."""

    data: TaskDataConfig = field(default_factory=TaskDataConfig)
