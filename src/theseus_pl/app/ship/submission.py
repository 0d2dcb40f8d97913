"""GLUE test-server submission files: a task's test split(s) predicted and written as the server reads them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch

from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.modules import ClassifierModule

STSB_RANGE = (0.0, 5.0)


def prediction_strings(task: TaskSpec, logits: torch.Tensor) -> list[str]:
    """Logits to what the GLUE server expects in the ``prediction`` column."""
    if task.is_regression:
        return [f"{score:.3f}" for score in logits.squeeze(-1).clamp(*STSB_RANGE).tolist()]
    values = task.tsv.label_values if task.tsv else task.label_names
    return [values[index] for index in logits.argmax(-1).tolist()]


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
