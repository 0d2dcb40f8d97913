"""Per-step values logged from a LightningModule or a callback: numbers without costing the step, the training
loss every step, and nothing from a step that no trainer runs."""

from __future__ import annotations

import lightning.pytorch as pl
import torch

from theseus_pl.lightning._compat import attached_trainer, logs_this_step


def log_step_number(pl_module: pl.LightningModule, name: str, value: float, batch_size: int | None = None) -> None:
    """Log ``value`` for this step, on the steps whose values the loggers write (``log_every_n_steps``).

    Each ``LightningModule.log`` call costs about a millisecond of Python (Lightning copies its result records),
    which adds up to a tenth of a short GPU step, and the loggers keep only every n-th step's value anyway (the
    same rule as Lightning's LearningRateMonitor). The value goes in as a CPU tensor: from a Python number
    Lightning makes a tensor on the model's device, on a GPU a blocking host-to-device copy.
    """
    if logs_this_step(pl_module):
        number = torch.tensor(value, dtype=torch.float32)
        pl_module.log(name, number, on_step=True, on_epoch=False, batch_size=batch_size)


def log_training_loss(pl_module: pl.LightningModule, loss: torch.Tensor, batch_size: int) -> None:
    """Log the step's training loss as ``train/loss``, every step: the progress bar shows it, and a fine-tuning that
    diverged is found by its last value. A step called by hand (a check of the loss; the tests) has no trainer to log
    to, and Lightning would warn about it on every call: nothing is logged there."""
    if attached_trainer(pl_module) is not None:
        pl_module.log("train/loss", loss, prog_bar=True, batch_size=batch_size)
