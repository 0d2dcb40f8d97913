"""Held-out metrics of a causal language model: perplexity, and how closely it follows its predecessor.

Every count is per predicted token (token-weighted, not averaged per window), so a padded last window weighs as
little as it holds: position ``t``'s logits predict the label at ``t + 1``; labels of -100 (padding) are skipped.

- ``perplexity``: ``exp`` of the mean negative log-likelihood of the held-out tokens (``nll``, in nats); ``inf``
  where that overflows (:func:`~theseus_pl.core.decoders.perplexity_of`).
- ``kl``: the mean over tokens of KL(predecessor ‖ model), in nats: how much of the predecessor's next-token
  distribution the compressed model loses.
- ``agreement``: the share of tokens where the model's most likely next token is the predecessor's.

The last two need the predecessor's logits for the same windows (``reference_logits``); without them only
perplexity and nll are reported. Sums are kept as metric states, so DDP ranks add up.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import Metric

from theseus_pl.core.decoders import perplexity_of
from theseus_pl.data.language_model import IGNORED


def predicted_positions(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits and the labels they predict, flattened to the positions with a real next token."""
    logits, labels = logits[:, :-1], labels[:, 1:]
    keep = labels != IGNORED
    return logits[keep].float(), labels[keep]


class LanguageModelMetrics(Metric):
    """Token-weighted held-out perplexity, and KL divergence and top-1 agreement with a reference model."""

    full_state_update = False
    headline = "perplexity"  # logged as val/perplexity, in the progress bar; checkpoints keep its minimum

    def __init__(self) -> None:
        super().__init__()
        for name in ("nll_sum", "tokens", "kl_sum", "agreeing", "compared"):
            self.add_state(name, default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, logits: torch.Tensor, labels: torch.Tensor, reference_logits: torch.Tensor | None = None) -> None:
        predicted, targets = predicted_positions(logits, labels)
        log_probs = F.log_softmax(predicted, dim=-1)
        self.nll_sum += F.nll_loss(log_probs, targets, reduction="sum").double()
        self.tokens += targets.numel()
        if reference_logits is None:
            return
        reference, _ = predicted_positions(reference_logits, labels)
        reference_log_probs = F.log_softmax(reference, dim=-1)
        kl = (reference_log_probs.exp() * (reference_log_probs - log_probs)).sum(-1)
        self.kl_sum += kl.sum().double()
        self.agreeing += (predicted.argmax(-1) == reference.argmax(-1)).sum()
        self.compared += targets.numel()

    def compute(self) -> dict[str, float]:
        if self.tokens == 0:
            raise ValueError("No held-out token was predicted: the held-out windows are empty or all padding.")
        nll = float(self.nll_sum / self.tokens)
        values = {"perplexity": perplexity_of(nll), "nll": nll}
        if self.compared > 0:
            values["kl"] = float(self.kl_sum / self.compared)
            values["agreement"] = float(self.agreeing / self.compared)
        return values
