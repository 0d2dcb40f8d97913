"""The deploy stage's settings and the block it returns: plain records, importable without torch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

QUANTIZE_CHOICES = (None, "int8")


@dataclass(frozen=True)
class DeploySettings:
    """How the successor is deployed and timed (``deploy.*`` in a run; the command's flags)."""

    quantize: str | None = "int8"
    sequence_length: int | None = 128  # timing batches padded (or cut) to this many tokens; None: their longest row
    batch_sizes: tuple[int, ...] = (1, 32)
    repeats: int = 20
    threads: int | None = None  # None: torch's current number of threads

    def __post_init__(self) -> None:
        if self.quantize not in QUANTIZE_CHOICES:
            raise ValueError(f"deploy.quantize={self.quantize!r} must be null (fp32 only) or int8.")
        if self.sequence_length is not None and self.sequence_length < 2:
            raise ValueError(f"deploy.sequence_length={self.sequence_length} must be null or at least 2 tokens.")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise ValueError(f"deploy.batch_sizes={list(self.batch_sizes)} must be batch sizes of at least 1.")
        if self.repeats < 1:
            raise ValueError(f"deploy.repeats={self.repeats} must be at least 1.")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"deploy.threads={self.threads} must be null or at least 1.")

    @classmethod
    def from_config(cls, settings: Mapping[str, Any]) -> DeploySettings:
        """From a run's ``deploy`` group; its ``onnx`` switch says whether to deploy at all, not how."""
        values = {key: value for key, value in settings.items() if key != "onnx"}
        return cls(**{**values, "batch_sizes": tuple(values.get("batch_sizes", cls.batch_sizes))})


def wanted(settings: Mapping[str, Any]) -> bool:
    """Whether a run's ``deploy`` group asks for deployment: ``onnx=true``, or a quantisation (which needs ONNX)."""
    return bool(settings.get("onnx")) or settings.get("quantize") is not None


@dataclass(frozen=True)
class Deployment:
    """The ``deployment`` block of ``results.json`` (and of ``<model>/onnx/deployment.json``).

    Models are named ``pytorch_predecessor``, ``pytorch_successor``, ``onnx_fp32``, ``onnx_int8``; batch sizes
    ``batch_<n>``. ``theseus_pl.app.results`` writes and reads it.
    """

    onnx: str  # the fp32 model's path inside the successor's folder
    onnx_int8: str | None  # None without quantisation
    quantization: str | None  # how the int8 model was made
    checked_on: str  # the rows the ONNX logits were checked on, in words
    max_abs_diff: float  # the largest difference from PyTorch's logits
    tolerance: float
    dev_score: dict[str, float | None] | None  # per model, x100; None without dev data
    latency_ms: dict[str, dict[str, float]]  # p50 per batch size, then per model
    speedup_over_predecessor: dict[str, dict[str, float] | None]  # per batch size; None without a predecessor
    size_mb: dict[str, float]  # per model
    smaller_than_predecessor: dict[str, float] | None  # None without a predecessor
    settings: DeploySettings  # with the threads actually used
    versions: dict[str, str]  # torch, onnx, onnxruntime
    seconds: float  # the time the stage took
