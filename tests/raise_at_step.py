"""A callback that makes a job fail mid-training, for tests of what a failed job leaves behind."""

import lightning.pytorch as pl


class RaiseAtStep(pl.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"planned failure at step {self.step}")
