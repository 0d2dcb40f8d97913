"""Lightning callbacks: the ones that drive module replacing (the rate, the phase switch), the ones that let a
killed run resume exactly (a checkpoint that does not wait for a better score, a seed per step), the ones that end a
training that diverged or cannot reach a score, and a progress bar that a failed run closes and a resumed one shows
whole."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, Checkpoint, ModelCheckpoint, TQDMProgressBar
from lightning.pytorch.callbacks.progress.tqdm_progress import Tqdm
from lightning.pytorch.trainer.states import TrainerFn

from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.lightning._compat import raise_min_steps, validation_follows
from theseus_pl.lightning.step_logging import log_step_number

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
        log.info("Replacement schedule: %s.", self.schedule.describe())

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
        raise_min_steps(trainer, self.switch_step + 1)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self.switch_step:
            # Validations so far judged phase-1 models; phase 2 starts with a clean slate and full patience.
            log.info("Step %d: every module is replaced; successor fine-tuning starts.", step)
            trainer.should_stop = False
            for early_stopping in trainer.early_stopping_callbacks:  # through its saved state: no private field
                early_stopping.load_state_dict({**early_stopping.state_dict(), "wait_count": 0})
        log_step_number(pl_module, "train/phase", self.phase(step))


def replacement_callbacks(schedule: ReplacementSchedule) -> list[Callback]:
    """The two callbacks every Theseus run needs, agreeing on one schedule."""
    return [ReplacementScheduler(schedule), PhaseSwitch(schedule.switch_step)]


class TrainingEnded(RuntimeError):
    """A training ended before its last step with nothing to keep: why, and what to change, in its message."""


class DivergedError(TrainingEnded):
    """A training whose loss, dev score or weights are not finite: nothing it trained is a model to keep."""


class StoppedBelowScore(TrainingEnded):
    """A training :class:`StopBelowScore` ended: far enough in, it still scored under the score asked of it."""


class StopAtNonFiniteLoss(Callback):
    """Ends a training with :class:`DivergedError` at the first step whose training loss is not finite, or as it
    ends when a trained weight is not: from there on every weight is NaN, and a run that went on would score,
    record and ship it (a NaN classifier predicts one class, 70 % right on a dev set 70 % of that class). ``fix``
    ends the message: what the user can change (``"Lower optimizer.lr (now 1e+08)"``)."""

    def __init__(self, fix: str) -> None:
        self.fix = fix

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor) and not torch.isfinite(loss.detach()).all():
            raise DivergedError(
                f"The training diverged at step {trainer.global_step}: its loss is {float(loss)}. Nothing was "
                f"recorded. {self.fix}."
            )

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trained = [name for name, p in pl_module.named_parameters() if p.requires_grad and not p.isfinite().all()]
        if trained:
            raise DivergedError(
                f"The training diverged: {len(trained)} trained weights are not finite ({trained[0]}, ...) after "
                f"step {trainer.global_step}. Nothing was recorded. {self.fix}."
            )


class StopBelowScore(Callback):
    """Ends a training with :class:`StoppedBelowScore` at its first validation from ``after`` (a share) of its steps on
    whose ``monitor`` (higher is better) is under ``below``: a search's trial that cannot come near the search's floor
    stops there, before the rest of its steps and its deployment (Optuna's pruners read one objective's reports; a
    search weighs two). ``below=None``: never."""

    def __init__(self, below: float | None = None, after: float = 0.5, monitor: str = "val/score") -> None:
        self.below, self.after, self.monitor = below, after, monitor

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.below is None or trainer.sanity_checking:
            return
        steps = trainer.estimated_stepping_batches
        value = trainer.callback_metrics.get(self.monitor)
        if value is None or trainer.global_step < self.after * steps or float(value) >= self.below:
            return
        raise StoppedBelowScore(
            f"Stopped at step {trainer.global_step} of {steps:g}: {self.monitor} is {float(value):.2f}, under the "
            f"{self.below:g} asked of it from {self.after:.0%} of its steps on (callbacks.stop_below). Nothing was "
            "recorded."
        )


class InterruptNotice(Callback):
    """Says how to go on when the user stops a training with Ctrl-C: Lightning ends the process with status 1, and
    its own line about it is among the chatter the app hides. ``advice()`` is read as the training stops (a
    checkpoint may have been written since it started): what rerunning does."""

    def __init__(self, advice: Callable[[], str]) -> None:
        self.advice = advice

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, KeyboardInterrupt):
            log.warning("Interrupted at step %d. %s", trainer.global_step, self.advice())


class StepSeed(Callback):
    """Seeds torch's global generator before each training step from the run's seed and the step.

    Dropout then depends on the step alone, not on what drew from the generator before it: a resumed run (whose
    loaders and validations drew differently) trains exactly as an uninterrupted one, and so does a run that
    validates more often. With gradient accumulation each batch of a step has its place in the step in its seed too:
    the step's batches would otherwise drop the same units.
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        entropy = [self.seed, trainer.global_step]
        if trainer.accumulate_grad_batches > 1:  # (without, the seeds of the runs before stay as they were)
            entropy.append(batch_idx % trainer.accumulate_grad_batches)  # Lightning's window restarts each epoch
        torch.manual_seed(int(np.random.SeedSequence(entropy).generate_state(1)[0]))


SETTINGS_KEY = "theseus_pl_settings"  # where a checkpoint keeps the settings of the run that wrote it
PRECISION_KEY = "theseus_pl_precision"  # ... and the precision it trained in (trainer.precision=auto's choice)
DATA_KEY = "theseus_pl_data"  # ... and the fingerprint of the data it trained on, where the kind gives one


class SettingsInCheckpoint(Callback):
    """Writes the run's settings into every checkpoint it saves (under :data:`SETTINGS_KEY`), the precision it
    trains in (:data:`PRECISION_KEY`: ``auto`` chooses by the machine) and the fingerprint of its data
    (:data:`DATA_KEY`, where the run's kind gives one: files whose contents change under the same settings), so that
    a rerun can be compared with the run it would resume before a step is taken (``theseus_pl.app.checks.resume``)."""

    def __init__(self, settings: Mapping[str, Any], precision: str, data: str | None = None) -> None:
        self.settings = dict(settings)
        self.precision = precision
        self.data = data

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint[SETTINGS_KEY] = self.settings
        checkpoint[PRECISION_KEY] = self.precision
        if self.data is not None:
            checkpoint[DATA_KEY] = self.data


class RunClock(Callback):
    """The run's wall time through its resumes: the seconds since this process started the run (``started``, a
    ``time.perf_counter()`` value), plus those its checkpoint had counted when a killed run resumes from it.

    Stateful, so every checkpoint carries the seconds counted when it was written; what a killed process did after
    its last checkpoint is redone, not counted twice. Without it a resumed run recorded only the time since the
    resume: an hour's run resumed for its last minutes said it took minutes.
    """

    def __init__(self, started: float) -> None:
        self.started = started
        self.before = 0.0  # counted by the processes before this one, up to the checkpoint resumed from

    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.started

    def state_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.before = float(state_dict["seconds"])


class BestCheckpoint(ModelCheckpoint):
    """Lightning's ModelCheckpoint (the best model on the dev score) whose state follows its folder: a run moved or
    copied elsewhere (back from a GPU node; a cache moved while a predecessor's fine-tuning was interrupted) resumes
    there with its best score and file.

    Lightning restores the state only where the folder's path is unchanged. After a move it forgot the best score,
    so the next validation became the best whatever its score, and kept the best file's old path, which a resume with
    no validation left loaded (a file no longer there).
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        before = state_dict.get("dirpath")
        if before and self.dirpath and before != self.dirpath:
            state_dict = _moved_paths(state_dict, Path(before), Path(self.dirpath))
        super().load_state_dict(state_dict)


def _moved_paths(state_dict: dict[str, Any], before: Path, after: Path) -> dict[str, Any]:
    """``state_dict`` with every path in ``before`` (its folder, its best and last files) put in ``after``."""

    def moved(path: str) -> str:
        return str(after / Path(path).relative_to(before)) if path and Path(path).is_relative_to(before) else path

    paths = {key: moved(value) for key, value in state_dict.items() if key.endswith(("dirpath", "_path"))}
    best_k = {moved(path): score for path, score in state_dict.get("best_k_models", {}).items()}
    return {**state_dict, **paths, "best_k_models": best_k}


STOP_REQUEST = "theseus_pl_should_stop"  # the checkpoint key of trainer.should_stop (ResumeCheckpoint)


class ResumeCheckpoint(Checkpoint):
    """``last.ckpt``, what a rerun resumes from: the state after every validation and every ``every_n_steps``
    optimizer steps, whatever the score (Lightning's ``save_last`` rewrites it only when the score improves).

    A :class:`Checkpoint`, so Lightning runs it after the other callbacks: the early-stopping and best-checkpoint
    state it saves already count this validation. Lightning writes the file atomically (a temporary file, then a
    rename), so a run killed mid-write keeps the previous one. A step checkpoint is not written when a validation
    follows the step: resuming from it, Lightning would skip that validation; the one written after it serves.

    It also keeps the trainer's stop request, which Lightning does not restore: a run that early stopping ended and
    that was killed before its results were written would otherwise train on when resumed (early stopping's
    patience, restored, then ends it at a later validation, or never where the score improves).
    """

    def __init__(self, dirpath: str | Path, every_n_steps: int | None = None) -> None:
        self.path = Path(dirpath) / "last.ckpt"
        self.every_n_steps = every_n_steps
        self._saved_step: int | None = None
        self._step_at_batch_start: int | None = None
        self._resumed_stop_request = False

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        checkpoint[STOP_REQUEST] = trainer.should_stop

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self._resumed_stop_request = bool(checkpoint.get(STOP_REQUEST, False))

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Before the fit loop first asks whether it is done; min_steps still holds a stop back (see PhaseSwitch).
        trainer.should_stop = trainer.should_stop or self._resumed_stop_request

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.state.fn == TrainerFn.FITTING and not trainer.sanity_checking:
            self._save(trainer)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._step_at_batch_start = trainer.global_step

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # Only a batch that ended an optimizer step: under gradient accumulation the others leave gradients that a
        # checkpoint does not hold, so a run resumed from it would miss them
        stepped = trainer.global_step != self._step_at_batch_start
        every = self.every_n_steps
        if every and stepped and trainer.global_step % every == 0 and not validation_follows(trainer, batch_idx):
            self._save(trainer)

    def _save(self, trainer: pl.Trainer) -> None:
        if self._saved_step != trainer.global_step:
            # The whole state (optimizer, loops, callbacks): a resume needs it. Said explicitly, or Lightning logs
            # "`weights_only` was not set, defaulting to `False`" at every save.
            trainer.save_checkpoint(self.path, weights_only=False)
            self._saved_step = trainer.global_step


def progress_bar() -> ClosingProgressBar:
    """The bar of a fit the run makes outside its own Trainer (the predecessor's fine-tuning or adaptation): the run's
    kind (``callbacks.progress_bar``), not Lightning's default, which is Rich's where ``rich`` is installed and writes
    nothing to a log file until the fit ends (an hour at base size)."""
    return ClosingProgressBar(refresh_rate=10)


def progress_bars(settings: Mapping[str, Any]) -> list[ClosingProgressBar]:
    """The bar of a Trainer made from ``settings`` outside the run's own (a dev pass, the predecessor's fine-tuning
    or adaptation), as :func:`progress_bar`; none where the settings turn bars off (``enable_progress_bar``: the run's
    ``trainer.enable_progress_bar``; Lightning refuses a bar given then)."""
    return [progress_bar()] if settings.get("enable_progress_bar", True) else []


class ClosingProgressBar(TQDMProgressBar):
    """Lightning's tqdm progress bar, closed when a fit fails as when it ends, and whole after a resume.

    Lightning's own leaves its bars open on an exception, and an open bar prints its last line whenever it is
    collected: at the end of the process, after everything else a failed job of a multirun (or a test) printed.
    A fit resumed mid-epoch skips the epoch-start hook that names the epoch and sets the bar's total, so Lightning's
    said "Training: 130/?" until the epoch ended (hours, for an epoch of SST-2 at base size), with no time left and a
    rate counted from the epoch's start; this one starts such an epoch's bar at the resumed batch.
    """

    _resumed_mid_epoch = False  # this fit's first epoch: until its first batch

    def init_train_tqdm(self) -> Tqdm:
        """Lightning's training bar, opened naming the epoch and its length: Lightning's opens as "Training: 0/?"
        (a line every fit printed before its first epoch began), though the fit knows both by then."""
        total = self.total_train_batches
        return Tqdm(
            desc=f"Epoch {self.trainer.current_epoch}",
            total=None if total == float("inf") else total,
            position=2 * self.process_position,
            disable=self.is_disabled,
            leave=True,
            dynamic_ncols=True,
            file=sys.stdout,
            smoothing=0,
            bar_format=self.BAR_FORMAT,
        )

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._resumed_mid_epoch = trainer.fit_loop.restarted_mid_epoch

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._resumed_mid_epoch:
            self._resumed_mid_epoch = False
            # Lightning's total counts from here (the batches left, or the steps left where fewer)
            total = min(trainer.num_training_batches, batch_idx + self.total_train_batches)
            bar = self.train_progress_bar
            bar.reset(total=None if total == float("inf") else total)
            bar.initial = bar.n = batch_idx  # the batches before the resume: counted, but not in the rate
            bar.set_description(f"Epoch {trainer.current_epoch}")

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        for stage in ("train", "val", "test", "predict"):
            with suppress(TypeError):  # Lightning's accessor raises for a bar this fit never opened
                getattr(self, f"{stage}_progress_bar").close()
