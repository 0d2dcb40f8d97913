"""AdamW with linear warm-up and decay, shared by every training module."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup


def adamw_with_linear_schedule(
    parameters: Iterable[nn.Parameter],
    lr: float,
    weight_decay: float,
    warmup_ratio: float,
    total_steps: int,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the parameters that require grad; no decay on biases and LayerNorm weights.

    Biases and normalisation weights are the 1-D parameters in every encoder family, which is more robust than
    matching names ("LayerNorm", "layer_norm", "sa_layer_norm", …).

    On the CPU the step is torch's fused kernel: a MiniLM-L6 cut to 3 layers (17.4 M parameters) takes 20 ms
    a step against 139 ms for the default loop at one thread, a quarter of a fine-tuning step on short SST-2
    batches. Elsewhere torch's default (batched ``foreach`` on CUDA) stays: a fused optimizer unscales its own
    gradients, which Lightning refuses together with gradient clipping under ``precision=16-mixed``.
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
    scheduler = get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total_steps), total_steps)
    return optimizer, scheduler
