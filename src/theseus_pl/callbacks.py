"""Lightning callbacks that drive module replacing: the replacement rate and the phase switch."""

from __future__ import annotations

import logging
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn

from theseus_pl.loggers import log_step_number
from theseus_pl.schedules import ReplacementSchedule

log = logging.getLogger(__name__)

REPLACING, SUCCESSOR_FINETUNING = 1, 2


class ReplacementScheduler(Callback):
    """Sets ``pl_module.replacement_rate`` from the schedule before every training batch.

    ``p`` is a pure function of ``trainer.global_step``, so resuming a checkpoint restores it exactly.
    A batch that replaces nothing still advances ``global_step`` (see ``TheseusModule.training_step``).
    """

    def __init__(self, schedule: ReplacementSchedule) -> None:
        self.schedule = schedule

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        total = int(trainer.estimated_stepping_batches)
        if self.schedule.switch_step > total:
            rank_zero_warn(
                f"The replacement schedule {self.schedule} reaches p = 1 at step {self.schedule.switch_step}, "
                f"but this run has only {total} optimizer steps: successor fine-tuning will never start. Raise "
                f"trainer.max_steps (or max_epochs) to at least {self.schedule.switch_step}, or make p reach 1 "
                "sooner."
            )

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        pl_module.replacement_rate = self.schedule.rate(trainer.global_step)


class PhaseSwitch(Callback):
    """Marks the switch from module replacing (phase 1) to successor fine-tuning (phase 2) at ``switch_step``.

    Logs ``train/phase`` on logging steps and the switch once. Early stopping may not end a run before the switch:
    the trainer's ``min_steps`` is raised past it, and at the switch any stop request and every early-stopping
    patience counter from phase 1 are cleared, so phase 2 gets its full patience.
    """

    def __init__(self, switch_step: int) -> None:
        if switch_step < 0:
            raise ValueError(f"switch_step={switch_step} must be >= 0.")
        self.switch_step = switch_step

    def phase(self, step: int) -> int:
        return SUCCESSOR_FINETUNING if step >= self.switch_step else REPLACING

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # At least one step of phase 2 runs whatever early stopping said in phase 1.
        epoch_loop = trainer.fit_loop.epoch_loop
        epoch_loop.min_steps = max(epoch_loop.min_steps or 0, self.switch_step + 1)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self.switch_step:
            # Validations so far judged phase-1 models; phase 2 starts with a clean slate and full patience.
            log.info("Step %d: every module is replaced; successor fine-tuning starts.", step)
            trainer.should_stop = False
            for early_stopping in trainer.early_stopping_callbacks:
                early_stopping.wait_count = 0
        log_step_number(pl_module, "train/phase", self.phase(step))


def replacement_callbacks(schedule: ReplacementSchedule) -> list[Callback]:
    """The two callbacks every Theseus run needs, agreeing on one schedule."""
    return [ReplacementScheduler(schedule), PhaseSwitch(schedule.switch_step)]
