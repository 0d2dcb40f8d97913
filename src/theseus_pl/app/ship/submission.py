"""GLUE test-server submission files: a task's test split(s) predicted and written as the server reads them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch
from transformers import AutoConfig

from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.modules import ClassifierModule

STSB_RANGE = (0.0, 5.0)


def prediction_strings(task: TaskSpec, logits: torch.Tensor) -> list[str]:
    """Logits to what the GLUE server expects in the ``prediction`` column."""
    if task.is_regression:
        return [f"{score:.3f}" for score in logits.squeeze(-1).clamp(*STSB_RANGE).tolist()]
    values = task.tsv.label_values if task.tsv else task.label_names
    return [values[index] for index in logits.argmax(-1).tolist()]


def check_labels(model_dir: str, task: TaskSpec) -> None:
    """Refuse a model for another task before anything is loaded or predicted: its config names its labels."""
    num_labels = AutoConfig.from_pretrained(model_dir).num_labels
    if num_labels != task.num_labels:
        raise ValueError(
            f"{model_dir} predicts {num_labels} labels but {task.name} has {task.num_labels}; is it a model for "
            "another task?"
        )


def test_files(datamodule: TextTaskDataModule) -> list[str]:
    """Where each test split will be read from, a local file checked as reading it checks first (a missing one is
    refused the same way); the hub's splits are only named, as checking them would download them."""
    source, task = datamodule.source, datamodule.task
    if isinstance(source, GlueDirSource):
        return [str(source.path(task, split)) for split in task.test_splits]
    return [f"{split} of {source.describe(task)}" for split in task.test_splits]


def submission_path(task: TaskSpec, split: str, output_dir: Path) -> Path:
    return output_dir / f"{task.submission_names.get(split, task.name)}.tsv"


def write_submission(path: Path, indices: Sequence[int], predictions: Sequence[str]) -> Path:
    if len(indices) != len(predictions):
        raise ValueError(f"{len(indices)} test indices but {len(predictions)} predictions.")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        handle.write("index\tprediction\n")
        handle.writelines(f"{index}\t{prediction}\n" for index, prediction in zip(indices, predictions, strict=True))
    return path


def predict_and_write(
    model: torch.nn.Module, datamodule: TextTaskDataModule, output_dir: Path, trainer: pl.Trainer | None = None
) -> list[Path]:
    """Predict every test split of the datamodule's task and write one submission file per split."""
    trainer = trainer or pl.Trainer(accelerator="auto", devices=1, logger=False, enable_checkpointing=False)
    outputs = trainer.predict(ClassifierModule(model.eval()), datamodule=datamodule)
    splits = datamodule.task.test_splits
    per_split = outputs if len(splits) > 1 else [outputs]
    written = []
    for split, batches in zip(splits, per_split, strict=True):
        logits = torch.cat([batch.float().cpu() for batch in batches])
        path = submission_path(datamodule.task, split, output_dir)
        written.append(
            write_submission(path, datamodule.test_indices[split], prediction_strings(datamodule.task, logits))
        )
    return written
