"""Timing models on this machine, one way for every figure: the models take turns call by call.

A slower stretch of a shared machine then lands on every model alike. The run's speed-up over the predecessor is the
median of the per-round ratios; deployment's latencies are each model's median (p50), which ignores the odd stall
that a mean would absorb.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping

import torch
from torch import nn


def interleaved_seconds(
    calls: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, list[float]]:
    """Each call's wall time in seconds in each of ``repeats`` rounds (every call once a round, in turn), after
    ``warmup`` rounds that are not counted."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be at least 1.")
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_index in range(warmup + repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            elapsed = time.perf_counter() - start
            if round_index >= warmup:
                times[name].append(elapsed)
    return times


def p50_milliseconds(calls: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Each call's median wall time in milliseconds over ``repeats`` interleaved rounds, after ``warmup`` rounds."""
    return {name: 1000 * statistics.median(t) for name, t in interleaved_seconds(calls, repeats, warmup).items()}


def forward_call(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> Callable[[], object]:
    """One eval-mode forward pass of ``model`` on ``batch`` (labels dropped), waiting for a GPU to finish it."""
    model.eval()
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    synchronize = torch.cuda.synchronize if next(model.parameters()).is_cuda else lambda: None

    def call() -> object:
        with torch.inference_mode():
            output = model(**inputs)
        synchronize()
        return output

    return call


def inference_speedup(
    predecessor: nn.Module, successor: nn.Module, batch: Mapping[str, torch.Tensor], repeats: int = 5
) -> float:
    """Predecessor time over successor time on the same batch: the median of the ratios of ``repeats`` rounds."""
    times = interleaved_seconds({"predecessor": forward_call(predecessor, batch),
                                 "successor": forward_call(successor, batch)}, repeats)  # fmt: skip
    return statistics.median(p / s for p, s in zip(times["predecessor"], times["successor"], strict=True))


def decode_call(model: nn.Module, prompt: torch.Tensor, new_tokens: int) -> Callable[[], object]:
    """Greedy generation of exactly ``new_tokens`` tokens after ``prompt`` with the KV cache, as a user decodes."""
    model.eval()
    mask = torch.ones_like(prompt)
    synchronize = torch.cuda.synchronize if prompt.is_cuda else lambda: None

    def call() -> object:
        with torch.inference_mode():
            output = model.generate(
                prompt, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                use_cache=True, pad_token_id=model.config.eos_token_id,
            )  # fmt: skip
        synchronize()
        return output

    return call


def generation_speed(
    predecessor: nn.Module,
    successor: nn.Module,
    prefill: Mapping[str, torch.Tensor],
    prompt: torch.Tensor,
    new_tokens: int,
    repeats: int = 3,
) -> dict[str, float]:
    """Tokens per second of both causal LMs, taking turns: ``prefill`` (a batch of windows in one forward pass) and
    decode (``new_tokens`` generated after ``prompt``, batch 1: the timed call includes the prompt's own forward
    pass, a short one, while tokens per second count only the new tokens), and the successor's speed-up at each (the
    median of the rounds' ratios)."""
    prefill_tokens = int(prefill["input_ids"].numel())
    calls = {
        "predecessor_prefill": forward_call(predecessor, prefill),
        "successor_prefill": forward_call(successor, prefill),
        "predecessor_decode": decode_call(predecessor, prompt, new_tokens),
        "successor_decode": decode_call(successor, prompt, new_tokens),
    }
    times = interleaved_seconds(calls, repeats)
    speed: dict[str, float] = {}
    for stage, tokens in (("prefill", prefill_tokens), ("decode", new_tokens)):
        before, after = times[f"predecessor_{stage}"], times[f"successor_{stage}"]
        speed[f"predecessor_{stage}_tokens_per_second"] = tokens / statistics.median(before)
        speed[f"successor_{stage}_tokens_per_second"] = tokens / statistics.median(after)
        speed[f"{stage}_speedup"] = statistics.median(p / s for p, s in zip(before, after, strict=True))
    return speed
