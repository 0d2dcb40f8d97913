"""AdamW with linear warm-up and decay, shared by every training module."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn


def adamw_with_linear_schedule(
    parameters: Iterable[nn.Parameter],
    lr: float,
    weight_decay: float,
    warmup_ratio: float,
    total_steps: int,
    restarts: Sequence[int] = (),
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the parameters that require grad; no decay on biases and LayerNorm weights.

    Biases and normalisation weights are the 1-D parameters in every encoder family, which is more robust than
    matching names ("LayerNorm", "layer_norm", "sa_layer_norm", …).

    On the CPU the step is torch's fused kernel: a MiniLM-L6 cut to 3 layers (17.4 M parameters) takes 20 ms
    a step against 139 ms for the default loop at one thread, a quarter of a fine-tuning step on short SST-2
    batches. Elsewhere torch's default (batched ``foreach`` on CUDA) stays: a fused optimizer unscales its own
    gradients, which Lightning refuses together with gradient clipping under ``precision=16-mixed``.

    The rate warms up over ``warmup_ratio`` of the steps, then decays linearly to 0 at ``total_steps``; at each
    step in ``restarts`` it jumps back to ``lr`` and decays again to 0 at the next restart or the end.
    """
    trainable = [p for p in parameters if p.requires_grad]
    if not trainable:
        raise ValueError("No parameter requires grad: there is nothing to train.")
    groups = [
        {"params": [p for p in trainable if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in trainable if p.dim() < 2], "weight_decay": 0.0},
    ]
    on_cpu = all(p.device.type == "cpu" for p in trainable)
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, fused=on_cpu or None)
    if not 0.0 <= warmup_ratio < 1.0:
        raise ValueError(f"optimizer.warmup_ratio={warmup_ratio} must be in [0, 1).")
    factor = LinearDecay(int(warmup_ratio * total_steps), total_steps, restarts)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class LinearDecay:
    """The learning-rate factor at each optimizer step: warm-up from 0, then linear decay to 0 in each segment.

    Segments end at each restart and at ``total_steps``; the first one's decay starts after the warm-up.
    """

    def __init__(self, warmup_steps: int, total_steps: int, restarts: Sequence[int] = ()) -> None:
        if any(not warmup_steps < step < total_steps for step in restarts):
            raise ValueError(f"Restarts {list(restarts)} must lie after the warm-up and before step {total_steps}.")
        self.warmup_steps = warmup_steps
        self.bounds = [warmup_steps, *sorted(restarts), total_steps]

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return step / self.warmup_steps
        for start, end in zip(self.bounds, self.bounds[1:], strict=False):
            if step < end:
                return (end - step) / (end - start)
        return 0.0
