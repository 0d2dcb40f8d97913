"""A causal LM's held-out metrics, with its predecessor's logits beside it: perplexity, KL and top-1 agreement."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from theseus_pl.lightning.callbacks import progress_bars
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.modules import Batch


class _Comparison(pl.LightningModule):
    """Validation only: the model's and the reference's logits on each held-out batch, into the model's metrics
    (against the reference) and the reference's own, so the reference runs once."""

    def __init__(self, model: nn.Module, reference: nn.Module | None) -> None:
        super().__init__()
        self.model, self.reference = model, reference
        self.metrics, self.reference_metrics = LanguageModelMetrics(), LanguageModelMetrics()

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        inputs = {name: value for name, value in batch.items() if name != "labels"}
        logits = self.model(**inputs, use_cache=False).logits
        reference = self.reference(**inputs, use_cache=False).logits if self.reference is not None else None
        self.metrics.update(logits, batch["labels"], reference)
        if reference is not None:
            self.reference_metrics.update(reference, batch["labels"])


def evaluate_language_model(
    model: nn.Module,
    windows: DataLoader | pl.LightningDataModule,
    settings: dict[str, Any],
    reference: nn.Module | None = None,
) -> dict[str, float]:
    """``perplexity`` and ``nll`` of ``model`` on held-out ``windows`` (a loader, or a datamodule's validation
    windows), and with ``reference`` (the predecessor) ``kl`` and ``agreement`` to it and its own
    ``reference_perplexity`` and ``reference_nll`` from the same pass; ``settings`` are the Trainer's (accelerator,
    precision)."""
    comparison = _Comparison(model, reference)
    trainer = pl.Trainer(**settings, logger=False, enable_checkpointing=False, callbacks=progress_bars(settings))
    with torch.no_grad():
        trainer.validate(comparison, windows, verbose=False)
    values = comparison.metrics.compute()
    if reference is not None:
        values.update({f"reference_{name}": value for name, value in comparison.reference_metrics.compute().items()})
    return values
