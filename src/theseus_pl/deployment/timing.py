"""Median latency of several models on the same input, measured side by side.

The models take turns call by call, so a slower stretch of a shared machine lands on all of them alike, and the
median (p50) ignores the odd stall that the mean would absorb.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping


def p50_milliseconds(calls: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Each call's median wall time in milliseconds over ``repeats`` interleaved rounds, after ``warmup`` rounds."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be at least 1.")
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_index in range(warmup + repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            elapsed = time.perf_counter() - start
            if round_index >= warmup:
                times[name].append(1000 * elapsed)
    return {name: statistics.median(values) for name, values in times.items()}
