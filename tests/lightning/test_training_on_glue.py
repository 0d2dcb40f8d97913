"""Theseus training wired to the DataModule and metrics: validation logs the task's metrics and val/score."""

import lightning.pytorch as pl
import pytest
from conftest import tiny_model
from glue_files import make_glue_dir

from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ConstantSchedule
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import TheseusModule

pytestmark = pytest.mark.quick


def fit(task, num_labels, tiny_tokenizer, tmp_path):
    datamodule = TextTaskDataModule(
        task, tiny_tokenizer, glue_dir=str(make_glue_dir(tmp_path / "glue")), cache_dir=tmp_path / "cache", batch_size=2
    )
    module = TheseusModule(
        TheseusModel(tiny_model("bert", num_labels=num_labels), 2), TaskMetrics.for_task(datamodule.task)
    )
    trainer = pl.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=replacement_callbacks(ConstantSchedule(p=0.5, switch_step=1)),
    )
    trainer.fit(module, datamodule=datamodule)
    return trainer.callback_metrics


def test_validation_logs_components_and_score(tiny_tokenizer, tmp_path):
    metrics = fit("MRPC", 2, tiny_tokenizer, tmp_path)
    assert {"val/f1", "val/accuracy", "val/mean", "val/score", "val/loss"} <= set(metrics)
    assert metrics["val/score"] == 100 * metrics["val/mean"]


def test_mnli_validation_logs_both_dev_sets(tiny_tokenizer, tmp_path):
    metrics = fit("MNLI", 3, tiny_tokenizer, tmp_path)
    assert {"val/accuracy_m", "val/accuracy_mm", "val/score"} <= set(metrics)
    assert float(metrics["val/score"]) == 50 * float(metrics["val/accuracy_m"] + metrics["val/accuracy_mm"])
