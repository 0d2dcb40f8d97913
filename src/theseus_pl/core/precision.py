"""The precision a run trains and evaluates in, decided by the machine unless the user says: ``trainer.precision``.

``auto`` picks ``bf16-mixed`` (Lightning's bf16 autocast) where it is known or measured to be faster:

- a CPU with AMX (``amx_bf16``): always (measured there: a MiniLM training step 1.7x faster, inference 3x);
- a CPU with AVX-512 BF16 but no AMX: only where a short measurement (:func:`measure_bf16`, under a second at two
  threads) finds bf16 autocast at most :data:`BF16_AT_MOST` of fp32's time. The flags cannot tell these CPUs apart:
  bf16 steps were 1.2-1.5x *slower* on one (2026-11-22) and 1.4x *faster* on an AMD EPYC (2026-11-25), where the
  SST-2 protocol's best points scored within the fp32 seeds' spread under bf16. A run measures once per machine (the
  app keeps the measurement in its cache: ``theseus_pl.lightning.precision``), so that the jobs of a sweep, started
  together and timing each other's start-up, cannot choose differently;
- any other CPU: fp32 (``32-true``), without measuring: no bf16 instructions, so autocast only adds casts;
- a CUDA GPU: ``bf16-mixed`` where the GPU supports bf16.

Any other value (``32-true``, ``bf16-mixed``, ...) is used as it is. Every choice comes with its reason in words,
recorded in ``results.json`` (``hardware.precision_reason``).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional

from theseus_pl.core.timing import interleaved_seconds, was_busy

AUTO = "auto"
# The instruction-set flags that decide how fast bf16 and int8 run: recorded with every run and deployment.
RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
# On a CPU with AVX-512 BF16 and no AMX, bf16 is chosen when it takes at most this share of fp32's time: a margin
# over 1.0, because a step has parts the measurement leaves out (embeddings, softmax, the optimizer) that bf16 speeds
# up less. The AMD EPYC measured 0.46 here for training steps of 0.68-0.85x.
BF16_AT_MOST = 0.8
CPU_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})  # the flags under which auto may choose bf16 on a CPU
BUSY_RETRIES = 5  # further measurements, a second apart, while other processes keep the machine busy
MEASURED_TOKENS = 2048  # the tokens of the block :func:`measure_bf16` times: a batch of 16 x 128


@dataclass(frozen=True)
class Cpu:
    model: str | None  # "model name" of /proc/cpuinfo; None where it cannot be read
    flags: frozenset[str]

    @property
    def relevant_flags(self) -> list[str]:
        return [flag for flag in RELEVANT_FLAGS if flag in self.flags]


def parse_cpuinfo(text: str) -> Cpu:
    """The first processor's model name and flags in ``/proc/cpuinfo``'s layout."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return Cpu(fields.get("model name"), frozenset(fields.get("flags", "").split()))


@functools.cache
def this_cpu() -> Cpu:
    """This machine's CPU (no flags where ``/proc/cpuinfo`` does not exist: ``auto`` then means fp32)."""
    try:
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        return Cpu(None, frozenset())


@dataclass(frozen=True)
class Bf16Measurement:
    """bf16 autocast's time over fp32's on this CPU, what else ran meanwhile, and how the run came by it."""

    ratio: float
    other_cores: float | None  # other processes' CPU use while measuring, in cores (:mod:`theseus_pl.core.timing`)
    when: str = "at start"  # in words, for the choice's reason: "at start", "on 2026-11-26 (kept in ...)"

    @property
    def busy(self) -> bool:
        return was_busy(self.other_cores)


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision ``trainer.precision`` means on this machine, and why."""

    precision: str  # what Lightning trains and evaluates in: "32-true", "bf16-mixed", ...
    reason: str


def choose_precision(
    requested: str,
    on_gpu: bool,
    cpu_flags: frozenset[str],
    gpu_bf16: bool = False,
    bf16_measurement: Callable[[], Bf16Measurement] | None = None,
) -> PrecisionChoice:
    """What ``requested`` means on this machine: ``auto`` by the rule above, anything else as it is.

    ``bf16_measurement`` gives bf16's time over fp32's (default :func:`measure_bf16`); it is called only on a CPU
    with AVX-512 BF16 and no AMX.
    """
    if str(requested) != AUTO:
        return PrecisionChoice(str(requested), "set by trainer.precision")
    if on_gpu:
        if gpu_bf16:
            return PrecisionChoice("bf16-mixed", "the GPU supports bf16")
        return PrecisionChoice("32-true", "the GPU has no bf16")
    if "amx_bf16" in cpu_flags:
        return PrecisionChoice("bf16-mixed", "the CPU has AMX (amx_bf16)")
    if not cpu_flags & CPU_BF16_FLAGS:
        return PrecisionChoice("32-true", "the CPU has neither AMX nor AVX-512 BF16")
    measurement = (bf16_measurement or measure_bf16)()
    ratio = measurement.ratio
    measured = (
        f"the CPU has AVX-512 BF16 without AMX, and bf16 autocast took {ratio:.2f}x fp32's time {measurement.when}"
    )
    if measurement.busy:
        measured += f", while other processes kept {measurement.other_cores:.1f} cores busy"
    if ratio <= BF16_AT_MOST:
        return PrecisionChoice("bf16-mixed", f"{measured} (bf16 at or below {BF16_AT_MOST}x)")
    return PrecisionChoice("32-true", f"{measured} (bf16 only at or below {BF16_AT_MOST}x)")


@functools.cache
def measure_bf16() -> Bf16Measurement:
    """bf16 autocast's time over fp32's on this CPU for a training step's bulk: a MiniLM-sized feed-forward block
    (:data:`MEASURED_TOKENS` tokens, 384 -> 1,536 -> 384, GELU) forward and backward, the two taking turns
    (:mod:`theseus_pl.core.timing`) for 5 rounds after one warm-up; the median of the rounds' ratios. Once per
    process, with its torch threads; its own random generator, so the run's seeds draw what they would have drawn
    without it. A machine kept busy by other processes is measured again, up to :data:`BUSY_RETRIES` times a second
    apart (the jobs of a sweep start together: their start-up is over in seconds), and says so if it stays busy."""
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randn(MEASURED_TOKENS, 384, generator=generator)
    up = (torch.randn(384, 1536, generator=generator) / 384**0.5).requires_grad_()
    down = (torch.randn(1536, 384, generator=generator) / 1536**0.5).requires_grad_()

    def step(bf16: bool) -> Callable[[], None]:
        def call() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = functional.gelu(tokens @ up) @ down
            out.float().square().mean().backward()

        return call

    calls = {"fp32": step(False), "bf16": step(True)}
    times = interleaved_seconds(calls, repeats=5)
    for _ in range(BUSY_RETRIES):
        if not times.busy:
            break
        time.sleep(1.0)
        times = min(times, interleaved_seconds(calls, repeats=5, retries=0), key=lambda t: t.other_cores or 0.0)
    ratio = statistics.median(b / f for f, b in zip(times["fp32"], times["bf16"], strict=True))
    return Bf16Measurement(ratio, times.other_cores)


def uses_gpu(accelerator: str) -> bool:
    """Whether a Trainer with this ``accelerator`` trains on a CUDA GPU."""
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


def resolve_precision(
    requested: str, accelerator: str, bf16_measurement: Callable[[], Bf16Measurement] | None = None
) -> PrecisionChoice:
    """:func:`choose_precision` for this machine and a Trainer's ``accelerator``."""
    on_gpu = uses_gpu(accelerator)
    gpu_bf16 = on_gpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return choose_precision(requested, on_gpu, this_cpu().flags, gpu_bf16, bf16_measurement)


def cpu_bf16_problem() -> str | None:
    """Why this torch build cannot train under bf16 autocast on the CPU (None when it can): tried on a tiny product."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            product = torch.ones(2, 2) @ torch.ones(2, 2)
    except (RuntimeError, TypeError) as error:
        return f"{type(error).__name__}: {error}"
    return None if product.dtype == torch.bfloat16 else f"autocast gave {product.dtype}, not bfloat16"
