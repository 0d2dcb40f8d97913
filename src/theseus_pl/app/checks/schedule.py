"""When a run trains and validates, checked from the settings and the run's length before it starts, the same for
every kind of run: whether a method trained by the replacement schedule finishes replacing inside the run, whether
validation happens at all, and whether the callbacks that act on it monitor a value the run logs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.checks.settings import RunSettings
from theseus_pl.core.settings import positive_int
from theseus_pl.lightning.modules import monitorable


def schedule_problems(cfg: DictConfig, settings: RunSettings, train_rows: int | None) -> list[str]:
    """A method trained by the replacement schedule whose replacing phase cannot end inside the run, unless the
    user allows it; a learning rate restarted at the switch needs the switch to fall inside the run, after the
    warm-up. ``train_rows``: the training rows, for a run that counts epochs (None: unknown, not checked then)."""
    if settings.method is None or settings.schedule is None or settings.theseus is None:
        return []
    if not settings.method.needs_schedule:
        return []
    total = total_steps(cfg, train_rows)
    if total is None or not positive_int(total):
        return []
    switch_step = settings.schedule.switch_step
    problems = []
    warmup = int(_number(cfg.optimizer.get("warmup_ratio", 0.0)) * total)
    if settings.theseus.lr_schedule == "per_phase" and not warmup < switch_step < total:
        problems.append(
            f"theseus.lr_schedule=per_phase restarts the learning rate at the switch to successor fine-tuning, step "
            f"{switch_step}, which must lie after the warm-up ({warmup} steps) and before the last step ({total})."
        )
    if switch_step >= total and not cfg.get("allow_unfinished_schedule", False):
        problems.append(
            f"The replacement schedule reaches p = 1 at step {switch_step} but the run has {total} optimizer steps: "
            f"successor fine-tuning (phase 2) would never run. Raise trainer.max_steps above {switch_step}, make p "
            "reach 1 sooner (schedule_steps), or allow it with allow_unfinished_schedule=true."
        )
    return problems


def validation_problems(cfg: DictConfig, train_rows: int | None, unit: str = "rows") -> list[str]:
    """A validation interval longer than an epoch where validation is counted within each epoch: Lightning refuses
    it only as training starts, after the predecessor is made. ``train_rows``: the training rows (windows of text,
    sentences), ``data.batch_size`` of them a batch; None: not checked. ``unit``: what a row is, in words."""
    interval, every_epochs = cfg.trainer.get("val_check_interval"), cfg.trainer.get("check_val_every_n_epoch")
    batch_size, validates = cfg.data.batch_size, cfg.trainer.get("limit_val_batches", 1.0) != 0
    if every_epochs is None or train_rows is None or not (validates and positive_int(interval)):
        return []
    epoch_batches = batches_an_epoch(train_rows, batch_size) if positive_int(batch_size) else None
    if epoch_batches is None or interval <= epoch_batches:
        return []
    return [
        f"trainer.val_check_interval={interval} counts batches within each epoch (trainer.check_val_every_n_epoch="
        f"{every_epochs}), and an epoch here is {epoch_batches:,} batches ({train_rows:,} {unit}, {batch_size} a "
        "batch): the run would never validate, and Lightning refuses it once training starts. Fix: "
        f"trainer.val_check_interval={epoch_batches} or less, or trainer.check_val_every_n_epoch=null (batches counted "
        "over the whole run)."
    ]


def monitor_problems(cfg: DictConfig, logged: Iterable[str]) -> list[str]:
    """A callback (``callbacks.early_stopping``, ``callbacks.model_checkpoint``, one of your own) monitoring a value
    the run never logs: Lightning finds out only at the first validation, possibly hours in. ``logged``: the names
    the run's metrics give (``TaskMetrics.logged``)."""
    names = monitorable(logged)
    problems = []
    for name, callback in (cfg.get("callbacks") or {}).items():
        monitor = callback.get("monitor") if isinstance(callback, Mapping) else None
        if monitor is not None and monitor not in names:
            problems.append(
                f"callbacks.{name}.monitor={monitor}: this run logs no such value; it logs {', '.join(names)}."
            )
    return problems


def _number(value: Any) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def total_steps(cfg: DictConfig, train_rows: int | None) -> int | None:
    """The run's optimizer steps on one device: ``max_steps``, or fewer when ``max_epochs`` ends it first (None when
    that needs ``train_rows`` and they are not known, or settings that are refused)."""
    trainer: Mapping[str, Any] = OmegaConf.to_container(cfg.trainer, resolve=True)  # type: ignore[assignment]
    max_steps, max_epochs = trainer.get("max_steps", -1), trainer.get("max_epochs")
    if max_epochs is None or max_epochs < 0:
        return max_steps
    accumulated = trainer.get("accumulate_grad_batches", 1)
    if train_rows is None or not (positive_int(cfg.data.batch_size) and positive_int(accumulated)):
        return None
    epoch_steps = batches_an_epoch(train_rows, cfg.data.batch_size) // accumulated
    return min(max_steps if max_steps > 0 else max_epochs * epoch_steps, max_epochs * epoch_steps)


def batches_an_epoch(train_rows: int, batch_size: int) -> int:
    """The training batches of one epoch, the last one partial (the loaders keep it)."""
    return -(-train_rows // batch_size)
