"""A decoder LM's predecessor adapted to the run's training text: every parameter fine-tuned on the language-model
loss for ``finetune.steps`` optimizer steps of the run's training windows, cached.

It is two things to a comparison (Minitron's "teacher correction"): the reference that separates what compression
loses from what adapting to the text gains (a successor healed on the text can beat the untouched predecessor there),
and the better teacher for distillation (``method.teacher=adapted``). Cached like an encoder's fine-tuned
predecessor: keyed by the predecessor's files, the text, the windows, the batch, the steps, the optimizer settings,
the seed (the order of the windows) and the precision, so every method and run of a comparison reuses one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from theseus_pl.app.predecessors.classifier import model_fingerprint
from theseus_pl.core.decoders import load_causal_lm
from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.data.language_model import LanguageModelingDataModule, window_loader
from theseus_pl.data.training_order import ShuffledSampler
from theseus_pl.lightning.callbacks import progress_bars
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
) -> str:
    """The folder of ``predecessor_dir`` fine-tuned on ``datamodule``'s training windows (``finetune``: steps, lr,
    weight_decay, warmup_ratio), from the cache or trained into it."""
    settings = {name: finetune[name] for name in ("steps", "lr", "weight_decay", "warmup_ratio")}
    key = {
        "predecessor": model_fingerprint(predecessor_dir),
        "text": datamodule.source.fingerprint(),
        "windows": [datamodule.window, datamodule.held_out, datamodule.split_seed, datamodule.batch_size],
        "finetune": settings,
        "seed": seed,
        "precision": str(trainer_settings["precision"]),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    directory = cache_dir / "adapted" / digest

    def build(staging: Path) -> None:
        log.info("Adapting the predecessor to the training text: %d steps (cached as %s)", settings["steps"], directory)
        _adapt(predecessor_dir, datamodule, settings, seed, staging, trainer_settings)

    def load(folder: Path) -> str:
        json.loads((folder / MADE).read_text())
        return str(folder)

    folder, built = load_or_build(directory, load, build, "the predecessor adapted to the text")
    if not built:
        log.info("Reusing the predecessor adapted to the text: %s", directory)
    return folder


def _adapt(
    predecessor_dir: str,
    datamodule: LanguageModelingDataModule,
    settings: dict[str, Any],
    seed: int,
    directory: Path,
    trainer_settings: dict[str, Any],
) -> None:
    model = load_causal_lm(predecessor_dir)
    module = FineTuningModule(
        model, LanguageModelMetrics(),
        lr=settings["lr"], weight_decay=settings["weight_decay"], warmup_ratio=settings["warmup_ratio"],
    )  # fmt: skip
    train = datamodule.splits["train"]
    loader = window_loader(train, datamodule.batch_size, sampler=ShuffledSampler(len(train), seed))
    with tempfile.TemporaryDirectory(prefix="theseus-pl-adapt-") as work:
        trainer = pl.Trainer(
            **trainer_settings, max_steps=settings["steps"], logger=False, enable_checkpointing=False,
            limit_val_batches=0, default_root_dir=work, callbacks=progress_bars(trainer_settings),
        )  # fmt: skip
        trainer.fit(module, loader)
    loss = trainer.callback_metrics.get("train/loss")
    if loss is not None and not torch.isfinite(loss):
        raise RuntimeError(
            f"Adapting the predecessor diverged (last training loss {float(loss)}); nothing was cached. Lower "
            "finetune.lr."
        )
    model.save_pretrained(directory)
    datamodule.tokenizer.save_pretrained(directory)
    made = {"predecessor": predecessor_dir, "finetune": settings, "seed": seed}
    (directory / MADE).write_text(json.dumps(made, indent=2))
