"""A run's peak memory as its record holds it: a plain record, importable without torch (the readers of results,
``report`` among them, need no torch); :mod:`theseus_pl.core.memory` measures it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeakMemory:
    """Peaks in MiB since :func:`~theseus_pl.core.memory.start_peak_memory`: ``cpu_mb`` the resident set, ``gpu_mb``
    CUDA's allocated peak (None without CUDA); ``cpu_since`` ``run`` or ``process`` (where the resident-set peak cannot
    be reset)."""

    cpu_mb: float
    gpu_mb: float | None
    cpu_since: str
