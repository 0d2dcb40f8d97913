"""A model's dev metrics, as every stage measures them: the predecessor's, the successor's, a cached entry's."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from transformers import PreTrainedModel

from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.lightning.callbacks import progress_bars
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import ClassifierModule


def evaluate(model: PreTrainedModel, datamodule: TextTaskDataModule, settings: dict[str, Any]) -> dict[str, float]:
    """The task's dev metrics of ``model``: every component and ``score`` (x100)."""
    trainer = pl.Trainer(**settings, logger=False, enable_checkpointing=False, callbacks=progress_bars(settings))
    trainer.validate(
        ClassifierModule(model, TaskMetrics.for_task(datamodule.task)), datamodule=datamodule, verbose=False
    )
    return {
        name.removeprefix("val/"): float(value)
        for name, value in trainer.callback_metrics.items()
        if name.startswith("val/") and not name.startswith("val/loss")
    }
