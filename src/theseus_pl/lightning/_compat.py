"""The Lightning internals this package relies on, in one place: each has no public equivalent.

Checked against Lightning :data:`CHECKED_WITH` (``tests/lightning/test_compat.py`` runs each in a real Trainer and
names that version, so an upgrade that changes them fails there first, not in a user's run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lightning.pytorch as pl

if TYPE_CHECKING:
    from lightning.pytorch.loggers import WandbLogger

CHECKED_WITH = "2.6"


def attached_trainer(pl_module: pl.LightningModule) -> pl.Trainer | None:
    """The Trainer running ``pl_module``; None for a module that no trainer runs (a step called by hand), where
    ``pl_module.trainer`` raises and ``pl_module.log`` warns that no trainer is registered."""
    return pl_module._trainer


def logs_this_step(pl_module: pl.LightningModule) -> bool:
    """Whether the loggers write this step's values (every ``log_every_n_steps``): the rule Lightning's own
    ``LearningRateMonitor`` reads from the trainer's logger connector, which has no public accessor. False for a
    module that no trainer runs."""
    trainer = attached_trainer(pl_module)
    return trainer is not None and trainer._logger_connector.should_update_logs


def raise_min_steps(trainer: pl.Trainer, steps: int) -> None:
    """Make the running fit last at least ``steps`` optimizer steps, whatever early stopping asks for before then.

    ``Trainer(min_steps=...)`` is fixed when the trainer is built; the fit loop reads it from its epoch loop, the
    only place it can be raised once a callback knows the step (the phase switch)."""
    epoch_loop = trainer.fit_loop.epoch_loop
    epoch_loop.min_steps = max(epoch_loop.min_steps or 0, steps)


def validation_follows(trainer: pl.Trainer, batch_idx: int) -> bool:
    """Whether Lightning validates after this training batch: its rule for step intervals (the training epoch
    loop's, which it does not expose), re-stated from public trainer state.

    Validation runs every ``val_check_batch`` batches, counted over the whole run when ``check_val_every_n_epoch``
    is None and within the epoch otherwise; a run that is stopping validates once more, where ``min_steps`` lets it
    stop (the fit loop's ``_can_stop_early``): a stop asked before the phase switch waits for the interval's.
    """
    every_epochs = trainer.check_val_every_n_epoch
    if not trainer.enable_validation or (every_epochs and (trainer.current_epoch + 1) % every_epochs):
        return False
    if trainer.should_stop and trainer.fit_loop._can_stop_early:
        return True
    batches = trainer.global_step * trainer.accumulate_grad_batches if every_epochs is None else batch_idx + 1
    return trainer.val_check_batch is not None and batches % trainer.val_check_batch == 0


def without_wandb_anonymous(logger: WandbLogger) -> WandbLogger:
    """``logger``, its W&B run not yet started, minus the ``anonymous`` argument Lightning always passes to
    ``wandb.init``.

    Lightning's ``WandbLogger`` puts ``"anonymous": None`` into the arguments it keeps for ``wandb.init`` (its private
    ``_wandb_init``) whatever it is given; wandb 0.31 deprecated the setting and prints ``wandb: WARNING The anonymous
    setting has no effect and will be removed in a future version.`` for any value passed, ``None`` included. Left
    out, ``wandb.init`` sees no such argument and says nothing. Call it before ``logger.experiment`` starts the run.
    """
    logger._wandb_init.pop("anonymous", None)
    return logger
