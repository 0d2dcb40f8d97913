"""How much faster the exported successor runs than its predecessor on this machine."""

from __future__ import annotations

import time

import torch
from torch import nn


def forward_seconds(model: nn.Module, batch: dict[str, torch.Tensor], repeats: int = 5) -> float:
    """Best wall time of ``repeats`` eval-mode forward passes after one warm-up (the minimum is the least noisy)."""
    model.eval()
    synchronize = torch.cuda.synchronize if next(model.parameters()).is_cuda else lambda: None
    with torch.inference_mode():
        model(**batch)
        times = []
        for _ in range(repeats):
            synchronize()
            start = time.perf_counter()
            model(**batch)
            synchronize()
            times.append(time.perf_counter() - start)
    return min(times)


def inference_speedup(
    predecessor: nn.Module, successor: nn.Module, batch: dict[str, torch.Tensor], repeats: int = 5
) -> float:
    """Predecessor time over successor time on the same batch, interleaved so drift hits both alike."""
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    ratios = [forward_seconds(predecessor, inputs, 1) / forward_seconds(successor, inputs, 1) for _ in range(repeats)]
    return sorted(ratios)[len(ratios) // 2]
