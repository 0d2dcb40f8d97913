"""Timing models on this machine, one way for every figure: the models take turns call by call.

A slower stretch of a shared machine then lands on every model alike. The run's speed-up over the predecessor is the
median of the per-round ratios; deployment's latencies are each model's median (p50), which ignores the odd stall
that a mean would absorb.

Taking turns does not save a ratio from a machine that is busy throughout: the models' threads then compete with
another job's, unevenly (a deploy timed beside another run recorded an int8 encoder at 7.87x that measured 3.53x
alone). So every timing also measures what else ran: the CPU time the whole machine spent outside this process
during the rounds, in cores (Linux's ``/proc/stat``). Above :data:`BUSY_CORES` the timing is taken again, once; a
timing still busy says so (:attr:`Timings.busy`), and the records built on it carry the figure.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # torch is imported by the calls that time a model: reading a record's timings needs none
    import torch
    from torch import nn

BUSY_CORES = 0.25  # other processes' mean CPU use while timing, in cores, above which a timing is not trusted
PROC_STAT = Path("/proc/stat")
T = TypeVar("T")


class Timings(dict[str, list[float]]):
    """Each call's seconds per round, and ``other_cores``: the mean number of cores other processes kept busy while
    they were taken (None where the machine's CPU time cannot be read)."""

    def __init__(self, times: dict[str, list[float]], other_cores: float | None) -> None:
        super().__init__(times)
        self.other_cores = other_cores

    @property
    def busy(self) -> bool:
        return was_busy(self.other_cores)


def was_busy(other_cores: float | None) -> bool:
    """Whether a timing taken while other processes used ``other_cores`` cores (None: unknown) is not to be trusted."""
    return other_cores is not None and other_cores > BUSY_CORES


def interleaved_seconds(
    calls: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1, retries: int = 1
) -> Timings:
    """Each call's wall time in seconds in each of ``repeats`` rounds (every call once a round, in turn), after
    ``warmup`` rounds that are not counted; taken again up to ``retries`` times while other processes kept the
    machine busy, the least busy taking kept."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be at least 1.")
    best: Timings | None = None
    for _ in range(retries + 1):
        timings = _rounds(calls, repeats, warmup)
        if best is None or (timings.other_cores or 0.0) < (best.other_cores or 0.0):
            best = timings
        if not best.busy:
            break
    return best


def _rounds(calls: Mapping[str, Callable[[], object]], repeats: int, warmup: int) -> Timings:
    times: dict[str, list[float]] = {name: [] for name in calls}

    def take_rounds() -> None:
        for round_index in range(warmup + repeats):
            for name, call in calls.items():
                start = time.perf_counter()
                call()
                elapsed = time.perf_counter() - start
                if round_index >= warmup:
                    times[name].append(elapsed)

    _, other_cores = other_cores_while(take_rounds)
    return Timings(times, other_cores)


def other_cores_while(call: Callable[[], T]) -> tuple[T, float | None]:
    """``call``'s result, and the mean number of cores other processes kept busy while it ran (None where the
    machine's CPU time cannot be read): what says whether a time taken meanwhile is this process's own."""
    others_before, wall_before = _others_cpu_seconds(), time.perf_counter()
    result = call()
    others_after, wall = _others_cpu_seconds(), time.perf_counter() - wall_before
    return result, None if others_before is None or others_after is None else (others_after - others_before) / wall


def _others_cpu_seconds() -> float | None:
    """CPU seconds the machine has spent busy, less this process's (all its threads): other processes' share,
    and the kernel's. None where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        fields = PROC_STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[:8])
    machine = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return machine - (own.user + own.system)


def p50_milliseconds(
    calls: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 2
) -> tuple[dict[str, float], float | None]:
    """Each call's median wall time in milliseconds over ``repeats`` interleaved rounds, after ``warmup`` rounds, and
    the cores other processes kept busy meanwhile (:attr:`Timings.other_cores`)."""
    timings = interleaved_seconds(calls, repeats, warmup)
    return {name: 1000 * statistics.median(t) for name, t in timings.items()}, timings.other_cores


def forward_call(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> Callable[[], object]:
    """One eval-mode forward pass of ``model`` on ``batch`` (labels dropped), waiting for a GPU to finish it."""
    import torch

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
) -> tuple[float, float | None]:
    """Predecessor time over successor time on the same batch, the median of the ratios of ``repeats`` rounds, and
    the cores other processes used meanwhile (None where that cannot be read): above :data:`BUSY_CORES` the ratio
    is not the model's."""
    times = interleaved_seconds({"predecessor": forward_call(predecessor, batch),
                                 "successor": forward_call(successor, batch)}, repeats)  # fmt: skip
    ratio = statistics.median(p / s for p, s in zip(times["predecessor"], times["successor"], strict=True))
    return ratio, times.other_cores


def decode_call(model: nn.Module, prompt: torch.Tensor, new_tokens: int) -> Callable[[], object]:
    """Greedy generation of exactly ``new_tokens`` tokens after ``prompt`` with the KV cache, as a user decodes."""
    import torch

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
    median of the rounds' ratios); ``other_cores``, what other processes used meanwhile (where it can be read)."""
    prefill_tokens = int(prefill["input_ids"].numel())
    calls = {
        "predecessor_prefill": forward_call(predecessor, prefill),
        "successor_prefill": forward_call(successor, prefill),
        "predecessor_decode": decode_call(predecessor, prompt, new_tokens),
        "successor_decode": decode_call(successor, prompt, new_tokens),
    }
    return token_speeds(interleaved_seconds(calls, repeats), {"prefill": prefill_tokens, "decode": new_tokens})


def token_speeds(times: Timings, tokens: Mapping[str, int]) -> dict[str, float]:
    """From the timings of ``predecessor_<stage>`` and ``successor_<stage>`` calls that each handle ``tokens[stage]``
    tokens: both models' tokens per second (over the median time) and the successor's speed-up at each stage (the
    median of the rounds' ratios), and ``other_cores`` where it was read; whatever runs the models."""
    speed: dict[str, float] = {}
    for stage, count in tokens.items():
        before, after = times[f"predecessor_{stage}"], times[f"successor_{stage}"]
        speed[f"predecessor_{stage}_tokens_per_second"] = count / statistics.median(before)
        speed[f"successor_{stage}_tokens_per_second"] = count / statistics.median(after)
        speed[f"{stage}_speedup"] = statistics.median(p / s for p, s in zip(before, after, strict=True))
    if times.other_cores is not None:
        speed["other_cores"] = times.other_cores
    return speed
