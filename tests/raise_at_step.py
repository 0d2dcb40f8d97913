"""Callbacks that make a job fail or die mid-training, for tests of what it leaves behind and how it resumes."""

import os
import signal

import lightning.pytorch as pl


class RaiseAtStep(pl.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"planned failure at step {self.step}")


class KillAtStep(pl.Callback):
    """Kills its own process before step ``step``, as a lost machine would: no exception, no cleanup, no flush."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class InterruptAtStep(pl.Callback):
    """Interrupts its own process before step ``step`` as Ctrl-C does: Python's SIGINT handler raises
    KeyboardInterrupt. Raised here, not signalled: a process started in the background of a shell ignores SIGINT."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == self.step:
            raise KeyboardInterrupt
