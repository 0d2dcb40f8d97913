"""A decoder LM's predecessor adapted to the run's training text: every parameter fine-tuned on the language-model
loss for ``finetune.steps`` optimizer steps of the run's training windows, cached.

It is two things to a comparison (Minitron's "teacher correction"): the reference that separates what compression
loses from what adapting to the text gains (a successor healed on the text can beat the untouched predecessor there),
and the better teacher for distillation (``method.teacher=adapted``). Cached like an encoder's fine-tuned
predecessor: keyed by the predecessor's files, the text, the windows, the batch, the steps, the optimizer settings,
the seed (the order of the windows) and the precision, so every method and run of a comparison reuses one. An
adaptation killed midway continues from its last checkpoint, as a predecessor's fine-tuning does
(:mod:`~theseus_pl.app.predecessors.resumable_training`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from theseus_pl.app.predecessors.classifier import model_fingerprint
from theseus_pl.app.predecessors.resumable_training import train_resumably, work_folder
from theseus_pl.core.decoders import load_causal_lm
from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.data.language_model import LanguageModelingDataModule
from theseus_pl.lightning.callbacks import DivergedError
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.modules import FineTuningModule

log = logging.getLogger(__name__)

MADE = "adapted.json"  # how the entry was made, written beside its weights


def adapted_predecessor(
    predecessor_dir: str,
    datamodule: LanguageModelingDataModule,
    finetune: dict[str, Any],
    seed: int,
    cache_dir: Path,
    trainer_settings: dict[str, Any],
    every_n_steps: int | None = None,
    resumable: bool = True,
) -> str:
    """The folder of ``predecessor_dir`` fine-tuned on ``datamodule``'s training windows (``finetune``: steps, lr,
    weight_decay, warmup_ratio), from the cache or trained into it (where ``resumable``, its resume checkpoint
    written every ``every_n_steps`` optimizer steps: a killed adaptation continues where it stopped)."""
    directory = adapted_folder(predecessor_dir, datamodule, finetune, seed, cache_dir, trainer_settings["precision"])

    def build(staging: Path) -> None:
        log.info("Adapting the predecessor to the training text: %d steps (cached as %s)", finetune["steps"], directory)
        _adapt(predecessor_dir, datamodule, finetune, seed, staging, trainer_settings, work_folder(directory),
               every_n_steps, resumable)  # fmt: skip

    def load(folder: Path) -> str:
        json.loads((folder / MADE).read_text())
        return str(folder)

    folder, built = load_or_build(directory, load, build, "the predecessor adapted to the text")
    if not built:
        log.info("Reusing the predecessor adapted to the text: %s", directory)
    return folder


def adapted_folder(
    predecessor_dir: str,
    datamodule: LanguageModelingDataModule,
    finetune: dict[str, Any],
    seed: int,
    cache_dir: Path,
    precision: str,
) -> Path:
    """Where the predecessor adapted with these settings is cached (made or not yet)."""
    key = {
        "predecessor": model_fingerprint(predecessor_dir),
        "text": datamodule.source.fingerprint(),
        "windows": [datamodule.window, datamodule.held_out, datamodule.split_seed, datamodule.batch_size],
        "finetune": _settings(finetune),
        "seed": seed,
        "precision": str(precision),
    }
    return cache_dir / "adapted" / hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


# The finetune group's keys an adaptation reads (the rest are an encoder's predecessor's): its cache key, and what
# the settings check lets a decoder-LM run change.
ADAPTATION_KEYS = ("steps", "lr", "weight_decay", "warmup_ratio")


def _settings(finetune: dict[str, Any]) -> dict[str, Any]:
    """The adaptation's own settings, as its cache key holds them."""
    return {name: finetune[name] for name in ADAPTATION_KEYS}


def adaptation_module(predecessor_dir: str, finetune: dict[str, Any]) -> FineTuningModule:
    """Every parameter of the predecessor trained on the LM loss with the finetune settings: how it is adapted to the
    text (and what ``--check`` times of it)."""
    return FineTuningModule(
        load_causal_lm(predecessor_dir), LanguageModelMetrics(),
        lr=finetune["lr"], weight_decay=finetune["weight_decay"], warmup_ratio=finetune["warmup_ratio"],
    )  # fmt: skip


def _adapt(
    predecessor_dir: str,
    datamodule: LanguageModelingDataModule,
    finetune: dict[str, Any],
    seed: int,
    directory: Path,
    trainer_settings: dict[str, Any],
    work: Path,
    every_n_steps: int | None,
    resumable: bool,
) -> None:
    """Every parameter trained on the LM loss over the run's training windows, in the run's data order (its
    seed's, resumable mid-epoch), no validation; the last step's model is the entry."""
    settings = _settings(finetune)
    module = adaptation_module(predecessor_dir, settings)

    def check_finite(trainer: pl.Trainer) -> None:
        loss = trainer.callback_metrics.get("train/loss")
        if loss is not None and not torch.isfinite(loss):
            raise DivergedError(
                f"Adapting the predecessor diverged (last training loss {float(loss)}); nothing was cached. Lower "
                "finetune.lr."
            )

    resumed_at = train_resumably(
        module, work, trainer_settings, check_finite, callbacks=[], every_n_steps=every_n_steps, resumable=resumable,
        trainer_args={"max_steps": settings["steps"], "limit_val_batches": 0},
        datamodule=datamodule,
    )  # fmt: skip
    module.model.save_pretrained(directory)
    datamodule.tokenizer.save_pretrained(directory)
    made = {"predecessor": predecessor_dir, "finetune": settings, "seed": seed}
    if resumed_at is not None:
        made["resumed_at_step"] = resumed_at
    (directory / MADE).write_text(json.dumps(made, indent=2))
    shutil.rmtree(work, ignore_errors=True)
