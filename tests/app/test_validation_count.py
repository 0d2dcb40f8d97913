"""``--check`` counts the validations a run will make by Lightning's rule, re-stated: the count must be Lightning's."""

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from theseus_pl.app.run.projection import validation_count

pytestmark = pytest.mark.quick


class _Linear(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.layer(batch[0]).pow(2).mean()

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.layer(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class _Validations(Callback):
    def __init__(self) -> None:
        self.count = 0

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.count += 1


def _lightnings_count(batches: int, epoch_batches: int, interval: float, every_epochs: int | None) -> int:
    rows = TensorDataset(torch.zeros(epoch_batches, 2))
    counter = _Validations()
    trainer = pl.Trainer(
        accelerator="cpu", max_steps=batches, max_epochs=-1, val_check_interval=interval,
        check_val_every_n_epoch=every_epochs, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, callbacks=[counter],
    )  # fmt: skip
    trainer.fit(_Linear(), DataLoader(rows, batch_size=1), DataLoader(rows, batch_size=1))
    return counter.count


@pytest.mark.parametrize(
    ("batches", "epoch_batches", "interval", "every_epochs"),
    [
        (20, 6, 4, None),  # every 4 batches across epochs (the task configs' way)
        (20, 6, 1.0, 1),  # after each epoch: the predecessor's fine-tuning
        (20, 6, 2, 1),  # every 2 batches within each epoch, the last one cut short
        (23, 6, 1.0, 2),  # every other epoch
        (10, 6, 4, 1),  # within the epoch: the count starts again at each epoch
    ],
)
def test_validations_are_counted_as_lightning_makes_them(batches, epoch_batches, interval, every_epochs):
    expected = _lightnings_count(batches, epoch_batches, interval, every_epochs)
    assert validation_count(batches, epoch_batches, interval, every_epochs) == expected
