"""The best checkpoint's state follows its folder: a run moved elsewhere (copied back from a GPU node, a cache moved)
and resumed there keeps its best score and file."""

import shutil

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from raise_at_step import RaiseAtStep
from torch.utils.data import DataLoader, TensorDataset

from theseus_pl.lightning.callbacks import BestCheckpoint, ResumeCheckpoint

pytestmark = pytest.mark.quick


class ScriptedScore(pl.LightningModule):
    """A model whose dev score is set by the step it is validated at: 5 at step 2, 1 at step 4."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.log("val/score", {2: 5.0, 4: 1.0}[self.global_step])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(folder, max_steps, callbacks, resume=False) -> ModelCheckpoint:
    best = BestCheckpoint(
        dirpath=folder, filename="best-step{step}", auto_insert_metric_name=False, monitor="val/score", mode="max"
    )  # as the run's
    loader = DataLoader(TensorDataset(torch.ones(16, 2)), batch_size=2)
    trainer = pl.Trainer(max_steps=max_steps, val_check_interval=2, limit_val_batches=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[best, ResumeCheckpoint(folder), *callbacks])  # fmt: skip
    trainer.fit(ScriptedScore(), loader, loader, ckpt_path=folder / "last.ckpt" if resume else None)
    return best


def test_a_moved_run_resumed_keeps_its_best_score_and_file(tmp_path):
    """Lightning's ModelCheckpoint restores its state only where the folder's path is unchanged: moved, the next
    validation (a worse score) became the best, and a resume with none left would load the best file's old path."""
    with pytest.raises(RuntimeError, match="planned failure at step 3"):  # after the validation at step 2
        fit(tmp_path / "there", 4, [RaiseAtStep(3)])
    shutil.move(tmp_path / "there", tmp_path / "here")
    best = fit(tmp_path / "here", 4, [], resume=True)
    assert best.best_model_score == 5.0
    assert best.best_model_path == str(tmp_path / "here" / "best-step2.ckpt")
    assert torch.load(best.best_model_path, weights_only=False)["global_step"] == 2
