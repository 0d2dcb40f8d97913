"""A model's forward passes over calibration batches, for measurements that forward hooks take on real tokens.

Both measurements a run takes before it builds successors (``neuron_activity`` and ``hidden_basis``) read states
inside the predecessor with hooks, over the real tokens of a few training batches: padding is excluded, the model
runs in eval mode without gradients, and the hooks are removed and the mode restored whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch.utils.hooks import RemovableHandle
from transformers import PreTrainedModel


class RealTokens:
    """Which tokens of the batch now running are real, for the hooks, and how many have run."""

    def __init__(self) -> None:
        self.mask = torch.ones(0, dtype=torch.bool)
        self.count = 0

    def of(self, states: torch.Tensor) -> torch.Tensor:
        """``states`` (batch, tokens, ...) at the real tokens only: (real tokens, ...)."""
        return states[self.mask]

    def run(
        self, model: PreTrainedModel, batches: Iterable[Mapping[str, torch.Tensor]], hooks: Sequence[RemovableHandle]
    ) -> None:
        """``model`` on each batch (labels dropped, on the model's device); ``hooks`` are removed afterwards."""
        training, device = model.training, next(model.parameters()).device
        try:
            model.eval()
            with torch.no_grad():
                for batch in batches:
                    inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
                    self.mask = inputs.get("attention_mask", torch.ones_like(inputs["input_ids"])).bool()
                    self.count += int(self.mask.sum())
                    model(**inputs)
        finally:
            model.train(training)
            for hook in hooks:
                hook.remove()
