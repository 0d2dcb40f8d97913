"""``--check``'s projected training time: a few steps of the run's own training timed on its own batches.

A plan that says "3,000 steps" does not say whether that is ten minutes or a day: fine-tuning a base-size encoder
takes 3.3 s a step in bf16 on one 2-core CPU and 27 s in fp32 on another. So the check builds the run's method, as
the run would, and times ``check_steps`` optimizer steps (forward, backward, optimizer) on batches of the run's own
that stand for all of them, after one untimed step; the projection is their mean times the run's steps.

The timed batches are a stratified sample: those at the midpoints of equal stretches of the run's batches sorted by
padded tokens (length-grouped batches differ: STS-B's from 1,472 to 4,032 tokens). The untimed step runs the largest,
so that no timed step pays for memory the run allocates once. Timed on the first batches of the order instead, after
whichever came first, STS-B's base-size steps took 3.2 to 8.2 s and three of them projected 4.5 s a step, where the
run's first 321 steps took about 5.9 s each; timed so, they take 5.6 to 5.9 s and project 5.7 s.

What a Theseus step costs depends on its replacement rate (a batch that replaces nothing is skipped; one that
replaces a module low in the stack runs backward through the frozen predecessor modules above it; at p = 1 the
successor runs alone), so the timed steps take the rates of points spread evenly over the run, and the mean stands
for all of its phases. Where the predecessor is still to be fine-tuned, its fine-tuning is timed the same way, and the
method is timed on the base with a fresh head in its place (the same shapes: the same time a step).

Validation is counted too: one pass over the dev set is timed, and the projection adds it once for each validation
Lightning will make (by the run's ``val_check_interval``) and once for the final scoring of the kept model. On a dev
set of 1,500 rows validated every 100 steps, validation is a fifth of a base-size run; left out, the projection of
STS-B's baselines erred 7 to 11 minutes short in 40. Export and the optional steps are not counted: the lines say so.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader

from theseus_pl.app.run.kind import PredecessorTraining, RunKind
from theseus_pl.app.run.stages import evaluation_settings
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.core.timing import Timings, other_cores_while
from theseus_pl.lightning.quiet import training_alone

SAMPLED_BATCHES = 256  # a sample of the run's batch sizes to draw the timed batches from, kept in memory while timed


class StepClock(Callback):
    """The seconds of each training batch (from its start to the end of its optimizer step), and, for a method that
    replaces modules, the replacement rate each batch runs at (``rates``, one a batch; the schedule's callbacks are
    left out, which would set the rate of the timing's own step count)."""

    def __init__(self, rates: list[float] | None) -> None:
        self.rates = rates
        self.seconds: list[float] = []
        self._started = 0.0

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.rates is not None:
            pl_module.replacement_rate = self.rates[batch_idx]
        _synchronize()
        self._started = time.perf_counter()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        _synchronize()
        self.seconds.append(time.perf_counter() - self._started)


def _synchronize() -> None:
    """Wait for the GPU's queued work, so that a step's time is its own (a no-op on the CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def sampled_rates(schedule: ReplacementSchedule | None, steps: int, timed: int, start: int = 0) -> list[float] | None:
    """The replacement rates at the midpoints of ``timed`` equal stretches of a run's steps ``start`` to ``steps``
    (``start``: where a resumed run continues; None for a method without a schedule)."""
    if schedule is None:
        return None
    return [schedule.rate(start + int((i + 0.5) * (steps - start) / timed)) for i in range(timed)]


def timed_steps(
    module: pl.LightningModule,
    datamodule: pl.LightningDataModule,
    trainer_settings: dict[str, Any],
    timed: int,
    rates: list[float] | None,
) -> Timings:
    """The seconds of ``timed`` training steps of ``module`` on batches that stand for ``datamodule``'s training
    order (:func:`representative_batches`), after one untimed step on its largest batch (which pays for first calls
    and sizes the memory), as :class:`Timings` (which say whether other processes kept the machine busy meanwhile)."""
    clock = StepClock(None if rates is None else [rates[0], *rates])
    batches = representative_batches(datamodule.train_dataloader(), timed)
    with tempfile.TemporaryDirectory(prefix="theseus-pl-check-") as work:
        trainer = pl.Trainer(
            **{**trainer_settings, "enable_progress_bar": False}, max_steps=timed + 1, limit_val_batches=0,
            num_sanity_val_steps=0, logger=False, enable_checkpointing=False, callbacks=[clock], default_root_dir=work,
        )  # fmt: skip
        loader = DataLoader(batches, batch_size=None, collate_fn=_as_collated)
        with training_alone():
            _, other_cores = other_cores_while(lambda: trainer.fit(module, train_dataloaders=loader))
    return Timings({"step": clock.seconds[1:]}, other_cores)


def representative_batches(loader: Iterable[Any], count: int) -> list[Any]:
    """The largest of ``loader``'s first :data:`SAMPLED_BATCHES` batches (in padded tokens), then ``count`` that stand
    for all of them: the batches at the midpoints of ``count`` equal stretches of them sorted by tokens (one batch
    stands for several stretches where there are fewer batches than ``count``). The run's order is shuffled, so its
    first batches are a sample of its sizes; they are read once and kept (a second pass would be another order)."""
    batches = list(itertools.islice(loader, SAMPLED_BATCHES))
    ranked = sorted(range(len(batches)), key=lambda index: padded_tokens(batches[index]))
    return [batches[ranked[-1]], *(batches[ranked[int((i + 0.5) * len(ranked) / count)]] for i in range(count))]


def padded_tokens(batch: Any) -> int:
    """The token positions a batch computes on, padding included (1 for a batch without ``input_ids``)."""
    ids = batch.get("input_ids") if isinstance(batch, Mapping) else None
    return ids.numel() if isinstance(ids, torch.Tensor) else 1


def _as_collated(batch: Any) -> Any:
    """The loader of chosen batches hands each on as it is: they were collated by the run's own loader."""
    return batch


def timed_validation(
    module: pl.LightningModule, datamodule: pl.LightningDataModule, trainer_settings: dict[str, Any], steps: Timings
) -> Timings:
    """``steps`` with the seconds of one validation pass of ``module`` over ``datamodule``'s dev set added (as
    ``validation``), the busier of the two timings' machines kept."""
    with tempfile.TemporaryDirectory(prefix="theseus-pl-check-") as work:
        trainer = pl.Trainer(
            **{**trainer_settings, "enable_progress_bar": False}, logger=False, enable_checkpointing=False,
            default_root_dir=work,
        )  # fmt: skip
        started = time.perf_counter()
        _, other_cores = other_cores_while(lambda: trainer.validate(module, datamodule=datamodule, verbose=False))
        seconds = time.perf_counter() - started
    busiest = max((cores for cores in (steps.other_cores, other_cores) if cores is not None), default=None)
    return Timings({**steps, "validation": [seconds]}, busiest)


def validation_count(batches: int, epoch_batches: int, interval: float, every_epochs: int | None) -> int:
    """How often Lightning validates in ``batches`` training batches of ``epoch_batches`` an epoch: every
    ``interval`` batches (a whole number) or every such share of an epoch (a fraction), counted over the whole run
    where ``every_epochs`` is None and within every ``every_epochs``-th epoch otherwise (its fit loop's rule)."""
    every = interval if isinstance(interval, int) else max(1, int(epoch_batches * interval))
    if every_epochs is None:
        return batches // every
    whole_epochs, rest = divmod(batches, epoch_batches)
    count = whole_epochs // every_epochs * (epoch_batches // every)
    return count + (rest // every if (whole_epochs + 1) % every_epochs == 0 else 0)


def projection_line(what: str, batches: int, timings: Timings, passes: int = 0) -> str:
    """One plan line: the projected time of ``batches`` training batches from the timed ones, and of ``passes``
    passes over the dev set where ``timings`` hold a validation pass's seconds."""
    seconds = timings["step"]
    mean = statistics.fmean(seconds)
    spread = f", {min(seconds):.3g}-{max(seconds):.3g} s" if len(seconds) > 1 else ""
    validation = timings.get("validation")
    counted = (
        f"{passes:,} dev pass{'es' if passes != 1 else ''} at {validation[0]:.3g} s (validation and the final "
        "scoring); export not counted"
        if validation
        else "validation and export not counted"
    )
    busy = (
        f"; other processes kept {timings.other_cores:.1f} cores busy meanwhile: the time is not this run's alone"
        if timings.busy
        else ""
    )
    total = mean * batches + (passes * validation[0] if validation else 0.0)
    return (
        f"time of {what}: about {_duration(total)} ({batches:,} batches at {mean:.3g} s; {len(seconds)} "
        f"timed on the run's own batches{spread}; {counted}{busy})"
    )


def _duration(seconds: float) -> str:
    """A duration in the units a reader plans with: seconds, minutes, or hours and minutes."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min"


def projected_time(cfg: DictConfig, kind: RunKind, steps: int | None, precision: str, done: int = 0) -> list[str]:
    """The plan's lines of projected time: the predecessor's fine-tuning where it is still to be made, and the
    method's training (``steps`` optimizer steps; None: one epoch, for a run bounded by epochs), of which a resumed
    run has ``done`` already."""
    timed = cfg.check_steps
    if cfg.threads:
        torch.set_num_threads(cfg.threads)  # as the run would: the timing is the run's
    evaluation = evaluation_settings(cfg.trainer, precision)
    settings = {**evaluation, "gradient_clip_val": cfg.trainer.get("gradient_clip_val")}
    lines = []
    with tempfile.TemporaryDirectory(prefix="theseus-pl-stand-in-", dir=_made(Path(cfg.paths.cache_dir))) as stand_in:
        # passed on, not kept: the predecessor's model is freed once timed, before the method's models load
        lines += _timed_predecessor_training(kind.stand_in_predecessor(Path(stand_in), evaluation), kind, evaluation,
                                             timed)  # fmt: skip
        method = kind.settings.method.build(kind.method_inputs(OmegaConf.to_container(cfg.optimizer, resolve=True)))
        assert method.module is not None  # the caller times methods that train
        accumulated = cfg.trainer.get("accumulate_grad_batches", 1)
        epoch_batches = len(kind.datamodule.train_dataloader())
        done = done if steps else 0  # an epoch-bounded run: one epoch timed, wherever it resumes
        batches = (steps - done) * accumulated if steps else epoch_batches
        timings = timed_steps(method.module, kind.datamodule, settings, timed,
                              sampled_rates(method.schedule, steps or batches, timed, done))  # fmt: skip
        validations = _run_validations(cfg.trainer, batches, epoch_batches)
        if validations is not None:
            limit = {"limit_val_batches": cfg.trainer.get("limit_val_batches", 1.0)}
            timings = timed_validation(method.module, kind.datamodule, {**evaluation, **limit}, timings)
        what = f"the rest of training, from step {done:,}" if done else "training" if steps else "one epoch of training"
        lines.append(projection_line(what, batches, timings, 1 + (validations or 0)))
    return lines


def _run_validations(trainer_cfg: DictConfig, batches: int, epoch_batches: int) -> int | None:
    """The validations the run's trainer makes in ``batches`` training batches; None where it validates never."""
    if trainer_cfg.get("limit_val_batches", 1.0) == 0:
        return None
    interval, every_epochs = trainer_cfg.get("val_check_interval", 1.0), trainer_cfg.get("check_val_every_n_epoch", 1)
    return validation_count(batches, epoch_batches, interval, every_epochs)


def _timed_predecessor_training(
    training: PredecessorTraining | None, kind: RunKind, evaluation: dict[str, Any], timed: int
) -> list[str]:
    """The line of the predecessor's training, where it is still to be made, timed with the Trainer settings that
    training uses (``evaluation``: no gradient clipping, whatever the method's trainer says); its model is freed on
    return, before the method's models load (a base-size model and its optimizer state take some 2 GB)."""
    if training is None:
        return []
    steps = timed_steps(training.module, kind.datamodule, evaluation, timed, None)
    if not training.validates:
        return [projection_line(training.what, training.batches, steps)]
    epochs = -(-training.batches // len(kind.datamodule.train_dataloader()))  # validated after each, then scored
    timings = timed_validation(training.module, kind.datamodule, evaluation, steps)
    return [projection_line(training.what, training.batches, timings, epochs + 1)]


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder
