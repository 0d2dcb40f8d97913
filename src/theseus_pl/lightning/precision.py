"""The precision a run trains and evaluates in, decided by the machine unless the user says: ``trainer.precision``.

``auto`` picks ``bf16-mixed`` (Lightning's bf16 autocast) on a CPU with AMX (``amx_bf16``), and ``32-true`` on every
other CPU; on a CUDA GPU, ``bf16-mixed`` where the GPU supports bf16. Any other value (``32-true``, ``bf16-mixed``,
...) is used as it is.

The rule is the CPU's flags, not a measurement at start. On an AMX CPU bf16 autocast made a MiniLM training step 1.7x
faster and inference 3x (issue 29's measurement). On CPUs with AVX-512 BF16 but no AMX the evidence differs: steps
1.2-1.5x slower on one (2026-11-22), 1.4x faster (inference 1.7x) on an AMD EPYC (2026-11-25); the flags cannot tell
those apart, and a short timing at start could, but bf16 there stays opt-in (``trainer.precision=bf16-mixed``) until
the protocol's scores are shown to hold under bf16.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

AUTO = "auto"
# The instruction-set flags that decide how fast bf16 and int8 run: recorded with every run and deployment.
RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


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


def choose_precision(requested: str, on_gpu: bool, cpu_flags: frozenset[str], gpu_bf16: bool = False) -> str:
    """What ``requested`` means on this machine: ``auto`` by the rule above, anything else as it is."""
    if str(requested) != AUTO:
        return str(requested)
    if on_gpu:
        return "bf16-mixed" if gpu_bf16 else "32-true"
    return "bf16-mixed" if "amx_bf16" in cpu_flags else "32-true"


def uses_gpu(accelerator: str) -> bool:
    """Whether a Trainer with this ``accelerator`` trains on a CUDA GPU."""
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())


def resolve_precision(requested: str, accelerator: str) -> str:
    """:func:`choose_precision` for this machine and a Trainer's ``accelerator``."""
    on_gpu = uses_gpu(accelerator)
    gpu_bf16 = on_gpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return choose_precision(requested, on_gpu, this_cpu().flags, gpu_bf16)


def cpu_bf16_problem() -> str | None:
    """Why this torch build cannot train under bf16 autocast on the CPU (None when it can): tried on a tiny product."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            product = torch.ones(2, 2) @ torch.ones(2, 2)
    except (RuntimeError, TypeError) as error:
        return f"{type(error).__name__}: {error}"
    return None if product.dtype == torch.bfloat16 else f"autocast gave {product.dtype}, not bfloat16"
