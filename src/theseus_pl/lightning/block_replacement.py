"""LLM-Streamline's baseline: one layer trained to do what a contiguous block of the predecessor's layers does.

The compact model is the predecessor without the block, one layer standing in its place (a copy of the block's
first layer, as Streamline's layer-replacement variant starts). Training matches hidden states: the predecessor
runs up to the block's end (no further), and the stand-in layer, given what entered the block (and the model's
positions, mask and rotary embeddings), is trained on the mean squared error to what left it, at every position the
attention mask keeps. Everything else is frozen. Validation measures the compact model itself (held-out
perplexity), as for every other method.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import block_input_output, keep_layers
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.modules import Batch, ClassifierModule
from theseus_pl.lightning.step_logging import log_training_loss


def streamlined_model(
    predecessor: PreTrainedModel, start: int, length: int, layers_path: str | None = None
) -> PreTrainedModel:
    """A copy of the predecessor with layers ``start .. start + length - 1`` replaced by one copy of layer ``start``
    (the block's first layer is kept, the rest of it removed)."""
    count = len(find_layer_stack(predecessor, layers_path).layers)
    if start < 0 or length < 2 or start + length > count:
        raise ValueError(f"A block of {length} layers from layer {start} does not fit the model's {count} layers.")
    return keep_layers(predecessor, [*range(start + 1), *range(start + length, count)], layers_path)


class BlockReplacementModule(ClassifierModule):
    """Trains the stand-in layer of :func:`streamlined_model` on the block's hidden states (MSE)."""

    def __init__(
        self,
        predecessor: PreTrainedModel,
        start: int,
        length: int,
        metrics: LanguageModelMetrics | None = None,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.0,
        layers_path: str | None = None,
    ) -> None:
        compact = streamlined_model(predecessor, start, length, layers_path)
        super().__init__(compact, metrics, lr=lr, weight_decay=weight_decay, warmup_ratio=warmup_ratio)
        # Frozen and outside the module's registry, so checkpoints hold the stand-in's model, not the predecessor too.
        self._predecessor = (predecessor.eval().requires_grad_(False),)
        self.start, self.length, self.layers_path = start, length, layers_path
        compact.requires_grad_(False)
        self.stand_in.requires_grad_(True)

    @property
    def predecessor(self) -> PreTrainedModel:
        return self._predecessor[0]

    @property
    def stand_in(self) -> torch.nn.Module:
        """The one trained layer, found in the model each time (an attribute would store it twice in checkpoints)."""
        return find_layer_stack(self.model, self.layers_path).layers[self.start]

    def on_fit_start(self) -> None:
        super().on_fit_start()
        self.predecessor.to(self.device).eval()  # on the module's device (unregistered, Lightning does not move it);
        # the targets come without dropout

    def block_loss(self, batch: Batch) -> torch.Tensor:
        """The mean squared error between the stand-in's output and the block's, over the kept positions."""
        entering, args, kwargs, leaving = block_input_output(
            self.predecessor, batch, self.start, self.length, self.layers_path
        )
        output = self.stand_in(entering, *args, **kwargs)
        output = output[0] if isinstance(output, tuple) else output
        keep = batch["attention_mask"].bool()
        return torch.nn.functional.mse_loss(output[keep].float(), leaving[keep].float())

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        loss = self.block_loss(batch)
        log_training_loss(self, loss, len(batch["input_ids"]))
        return loss

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return list(self.stand_in.parameters())
