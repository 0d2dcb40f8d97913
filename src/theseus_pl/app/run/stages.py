"""The stages every run goes through, whatever its kind: finding a finished run, resuming, the machine and its
precision, training, and the optional steps whose failure is recorded rather than raised."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resume import finished_run_problems
from theseus_pl.app.config.run_folder import last_checkpoint, sweep_folder
from theseus_pl.app.methods.method import Method
from theseus_pl.app.predecessors.classifier import looks_like_path, made_from
from theseus_pl.app.results.envelope import Hardware, ResultsError, RunRecord
from theseus_pl.app.results.reading import read_run
from theseus_pl.core.precision import AUTO, this_cpu, uses_gpu
from theseus_pl.lightning.callbacks import (
    InterruptNotice,
    RunClock,
    SettingsInCheckpoint,
    StepSeed,
    StopAtNonFiniteLoss,
)
from theseus_pl.lightning.precision import run_precision

log = logging.getLogger(__name__)


def run_hardware(trainer_cfg: DictConfig, cache_dir: Path, output_dir: Path | None = None) -> Hardware:
    """The machine the run trains on and the precision ``trainer.precision`` means on it (``auto``: see
    :mod:`theseus_pl.core.precision`; its measurement kept in ``cache_dir``, one for the run in ``output_dir``, its
    DDP ranks and resumes, and for its whole sweep)."""
    requested, accelerator = str(trainer_cfg.get("precision", AUTO)), str(trainer_cfg.get("accelerator", "auto"))
    shared_by = [folder for folder in (output_dir, sweep_folder()) if folder is not None]
    cpu, choice = this_cpu(), run_precision(requested, accelerator, cache_dir, shared_by)
    return Hardware(
        precision=choice.precision, precision_requested=requested, precision_reason=choice.reason,
        accelerator="gpu" if uses_gpu(accelerator) else "cpu", cpu=cpu.model, cpu_flags=cpu.relevant_flags,
    )  # fmt: skip


def evaluation_settings(trainer_cfg: DictConfig, precision: str) -> dict[str, Any]:
    """One device with the run's accelerator and precision: for evaluation and predecessor fine-tuning; their
    progress bars shown as the run's are (``trainer.enable_progress_bar``)."""
    return {
        "accelerator": trainer_cfg.get("accelerator", "auto"),
        "precision": precision,
        "devices": 1,
        "enable_model_summary": False,
        "enable_progress_bar": trainer_cfg.get("enable_progress_bar", True),
    }


def finished_record_in(output_dir: Path, cfg: DictConfig) -> RunRecord | None:
    """A finished run's results (its ``results.json``, of any kind), left untouched; None when this folder is to be
    trained (``cfg.resume`` permitting). A command of other training settings is refused (:class:`RunRefused`).

    Only ``resume=force`` redoes a finished run in place, once every check has passed
    (:func:`clear_finished_run`).
    """
    results = output_dir / "results.json"
    if not results.is_file() or cfg.resume == "force":
        return None
    try:
        record = read_run(results)
    except ResultsError as error:
        raise RunRefused([
            f"{error} This folder's run finished, but its record is damaged: resume=force redoes the run in place, "
            "or hydra.run.dir=ANOTHER_FOLDER runs it anew elsewhere."
        ]) from None  # fmt: skip
    if problems := finished_run_problems(output_dir, cfg, record.settings):
        raise RunRefused(problems)
    log.warning(
        "%s holds a finished run (results.json); nothing was changed. To redo it, rerun with resume=force (in place) "
        "or into another folder (hydra.run.dir=DIR).", output_dir,
    )  # fmt: skip
    return record


def clear_finished_run(output_dir: Path, resume: bool | str) -> bool:
    """For ``resume=force``, a finished run's results, checkpoints and successor removed, so nothing of the old run
    is resumed or mistaken for the new one's (a redo that crashes leaves no old successor to deploy as its own);
    whether there was one. Called once the new command has passed every check: a command refused after the old
    results went left a folder with neither run's record."""
    results = output_dir / "results.json"
    if resume != "force" or not results.is_file():
        return False
    log.warning("resume=force: redoing the finished run in %s; its results, checkpoints and successor go.", output_dir)
    results.unlink()
    shutil.rmtree(output_dir / "checkpoints", ignore_errors=True)
    empty_successor_folder(output_dir)
    return True


def empty_successor_folder(output_dir: Path) -> Path:
    """The run's ``successor/`` folder, emptied of what an earlier run in this folder left there (a run redone with
    ``resume=force``, or started over after a kill): its pickled module would be loaded and scored in place of the new
    safetensors, and its ONNX files published beside a model they are not."""
    folder = output_dir / "successor"
    shutil.rmtree(folder, ignore_errors=True)
    return folder


def train(
    cfg: DictConfig,
    method: Method,
    datamodule: pl.LightningDataModule,
    loggers: list[Logger],
    resume_from: Path | None,
    precision: str,
    settings: Mapping[str, Any],
    clock: RunClock,
    data: str | None = None,
) -> tuple[pl.Trainer, str | None]:
    """The fitted Trainer, and the checkpoint it resumed from (None for a fresh run); ``settings``, those that shape
    training, go into every checkpoint (what a resume is compared with) with the ``precision`` it trains in and the
    ``data``'s fingerprint, and so does the run's ``clock``."""
    diverged = StopAtNonFiniteLoss(f"Lower optimizer.lr (now {cfg.optimizer.lr:g}) or check the training data")
    interrupted = InterruptNotice(lambda: _resume_advice(Path(cfg.paths.output_dir)))
    callbacks = [*_configured_callbacks(cfg), *method.callbacks, StepSeed(cfg.seed),
                 SettingsInCheckpoint(settings, precision, data), clock, diverged, interrupted]  # fmt: skip
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers, precision=precision)
    resumed_from = str(resume_from) if resume_from else None
    if resumed_from:
        log.info("Resuming from %s", resumed_from)
    trainer.fit(method.module, datamodule=datamodule, ckpt_path=resumed_from)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Training is over: rank 0 evaluates and exports alone, and a later Trainer must not wait for ranks that
        # have finished (its data preparation barrier would make a new group of every rank and hang).
        torch.distributed.destroy_process_group()
    return trainer, resumed_from


def _resume_advice(output_dir: Path) -> str:
    """What rerunning an interrupted run's command does: resume from its last checkpoint, or start afresh."""
    last = last_checkpoint(output_dir)
    if last.is_file():
        return f"Rerun the same command to resume from {last}."
    return "No checkpoint was written yet: rerunning the same command starts the training afresh."


def _configured_callbacks(cfg: DictConfig) -> list[pl.Callback]:
    """The callbacks of ``cfg.callbacks``, but the progress bar where ``trainer.enable_progress_bar`` is false: the
    user asked for none, and Lightning refuses a bar then (after the predecessor was made)."""
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    if cfg.trainer.get("enable_progress_bar", True):
        return callbacks
    return [callback for callback in callbacks if not isinstance(callback, ProgressBar)]


def load_best_checkpoint(trainer: pl.Trainer | None, method: Method) -> tuple[str | None, int | None]:
    """The weights of the checkpoint the run's callbacks chose (the best on the validation headline) loaded into the
    method's module, and that checkpoint's path and step; (None, None) where none was chosen (nothing trained, or no
    checkpoint callback), the module left as training ended."""
    callback = trainer.checkpoint_callback if trainer is not None else None
    best = getattr(callback, "best_model_path", "") if callback is not None else ""
    if not best or method.module is None:
        return None, None
    checkpoint = torch.load(best, map_location="cpu", weights_only=False)
    method.module.load_state_dict(checkpoint["state_dict"])
    return best, checkpoint["global_step"]


def optional_step(results: RunRecord, step: str, action: Callable[[], object]) -> bool:
    """Run a step the scores do not depend on; a failure is recorded and logged, never raised. True if it failed."""
    try:
        action()
    except Exception as error:
        results.failed_steps[step] = f"{type(error).__name__}: {error}"
        log.warning("Step %r failed (%s: %s); the scores are in results.json.", step, type(error).__name__, error)
        return True
    return False


def hub_id(model: DictConfig) -> str | None:
    """The hub id of the model the user named (``model.hub_id``, else the predecessor or base when it is no local
    path): for the model card's ``base_model``. A shipped model's own id (the config's interpolation, not the
    user's ``model.hub_id``) holds for a predecessor given beside it only where this tool fine-tuned that predecessor
    from it: a classifier made elsewhere is not called by the shipped model's name."""
    named, given = model.get("predecessor") or model.get("base"), model.get("hub_id")
    if given and model.get("predecessor") and OmegaConf.is_interpolation(model, "hub_id"):
        given = given if _same_source(made_from(model.predecessor), model.base) else None
    return given or (None if not named or looks_like_path(named) else named)


def _same_source(made_from_base: str | None, base: str | None) -> bool:
    """Whether a predecessor's recorded base is ``base`` (paths compared once resolved)."""
    if made_from_base is None or base is None:
        return False
    return made_from_base == base or os.path.realpath(made_from_base) == os.path.realpath(base)


def each_process(world_size: int) -> str:
    """What a batch size means under DDP, in words for a plan line: each process trains on batches of its own."""
    return f" on each of {world_size} processes" if world_size > 1 else ""


def rows_per_step(cfg: DictConfig, world_size: int = 1) -> int:
    """The training rows (or windows) one optimizer step sees: the batch times the batches it accumulates, times the
    processes training together (DDP: each its own batch of ``data.batch_size``)."""
    return cfg.data.batch_size * cfg.trainer.get("accumulate_grad_batches", 1) * world_size
