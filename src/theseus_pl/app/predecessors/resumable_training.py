"""A predecessor's own training that continues after a kill: an encoder fine-tuned on its task, a decoder LM adapted
to its text. Either can take most of an hour on a CPU (RTE's fine-tuning at base size about 45 min, SmolLM2-135M's
150-step adaptation about 15, by ``--check`` on a 2-core Zen 4), and its result is a cache entry every run of a
comparison shares.

It trains in a work folder beside the cache entry it will become, named by the same key, so the next run that needs
the same entry finds the interrupted training and continues it: ``last.ckpt`` (the whole state: optimizer, schedule,
the data order reached, the best epoch) written after every validation and every ``every_n_steps`` optimizer steps.
The folder is removed once the entry is written, and when the training diverged (a resume would diverge again).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import transformers
from lightning.pytorch.callbacks import Checkpoint

import theseus_pl
from theseus_pl.data.cache_entry import being_built, is_cached
from theseus_pl.lightning.callbacks import DivergedError, ResumeCheckpoint, progress_bars
from theseus_pl.lightning.quiet import expect_own_files

log = logging.getLogger(__name__)

WORK_VERSIONS = "versions.json"  # the libraries that wrote a work folder's checkpoints


def work_folder(entry: Path) -> Path:
    """Where the training of the cache entry at ``entry`` keeps its checkpoints until it ends."""
    return entry.parent / f".work-{entry.name}"


def library_versions() -> dict[str, str]:
    """The versions of what saves and restores a training's checkpoints, as a work folder records them."""
    return {"lightning": pl.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "theseus_pl": theseus_pl.__version__}  # fmt: skip


def interrupted_at(work: Path) -> int | None:
    """The optimizer step an interrupted training in ``work`` continues from; None where there is none to continue:
    no ``last.ckpt``, one that cannot be read, or one written by other versions of the libraries that save and
    restore it (Lightning, torch, transformers, theseus_pl), which may not restore what they read."""
    last = work / "last.ckpt"
    if not last.is_file():
        return None
    try:
        written_by = json.loads((work / WORK_VERSIONS).read_text())
    except (OSError, ValueError):
        written_by = None
    if written_by != library_versions():
        log.warning("%s was written by other library versions (%s); the training starts over.", last, written_by)
        return None
    try:  # memory-mapped: the weights are not read
        return int(torch.load(last, map_location="cpu", weights_only=False, mmap=True)["global_step"])
    except Exception as error:  # cut short: torch's reasons are many
        log.warning("%s cannot be read (%s: %s); the training starts over.", last, type(error).__name__, error)
        return None


def entry_state(entry: Path, steps: int, done: int | None, made: str, making: str, training: str) -> str:
    """Where the entry a run needs would come from, in words for ``--check``'s plan: the cache, another job making
    it now, its interrupted training (at step ``done``, read by :func:`interrupted_at`), or ``steps`` of training.
    How the entry is made, in three forms: ``made`` ("fine-tuned on the task"), ``making`` ("fine-tuning it on the
    task") and ``training`` ("fine-tuning on the task")."""
    if is_cached(entry):
        return f"{made}, from the cache: {entry}"
    if being_built(entry):
        saved = f", at step {done} of {steps} when last saved" if done is not None else f", {steps} steps"
        return f"another job is {making} now{saved}; this run waits, then loads it: {entry}"
    if done is not None:
        return f"its interrupted {training} continues from step {done} of {steps}"
    return f"{made} first, {steps} steps, into the cache: {entry}"


def train_resumably(
    module: pl.LightningModule,
    work: Path,
    trainer_settings: dict[str, Any],
    check_finite: Callable[[pl.Trainer], None],
    *,
    callbacks: list[pl.Callback],
    every_n_steps: int | None,
    resumable: bool,
    trainer_args: dict[str, Any],
    **fit_args: Any,
) -> int | None:
    """``module`` trained by a Trainer of ``trainer_settings`` and ``trainer_args`` (``trainer.fit(module,
    **fit_args)``), continued from ``work``'s ``last.ckpt`` where an earlier call was interrupted; returns the step it
    continued from (None: from the start). ``check_finite(trainer)`` raises :class:`DivergedError` after the fit
    where it diverged. Not ``resumable`` (a run without its own resume checkpoint, where disk is short), no
    ``last.ckpt`` is written. The caller writes the entry from the trained module (and ``work``'s other files),
    then removes ``work``."""
    resumed_at = interrupted_at(work)
    if resumed_at is None:
        shutil.rmtree(work, ignore_errors=True)  # what a training left before its first checkpoint, or a stale one
        work.mkdir(parents=True, exist_ok=True)
        (work / WORK_VERSIONS).write_text(json.dumps(library_versions()))
    else:
        log.info("Continuing the training interrupted at step %d (%s)", resumed_at, work / "last.ckpt")
    expect_own_files(work)  # its versions.json, and what it resumes from
    callbacks = [*callbacks, *([ResumeCheckpoint(work, every_n_steps)] if resumable else [])]
    trainer = pl.Trainer(
        **trainer_settings, **trainer_args, logger=False, default_root_dir=work,
        callbacks=[*callbacks, *progress_bars(trainer_settings)],
        # none but the given checkpoints: Lightning's default one would write a second copy of the weights
        enable_checkpointing=any(isinstance(callback, Checkpoint) for callback in callbacks),
    )  # fmt: skip
    try:
        trainer.fit(module, ckpt_path=work / "last.ckpt" if resumed_at is not None else None, **fit_args)
        check_finite(trainer)
    except BaseException as error:
        if not resumable or isinstance(error, DivergedError):  # nothing to continue from, or a resume would diverge
            shutil.rmtree(work, ignore_errors=True)
        elif resumed_at is not None and isinstance(error, Exception):
            log.error("The training continued from %s failed; delete %s to start it over.", work / "last.ckpt", work)
        raise
    return resumed_at
