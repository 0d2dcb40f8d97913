"""The depth-against-width table: runs whose successors differ in shape, side by side.

One row per task, method and successor shape (layers, feed-forward width, hidden width and, for a narrowed
feed-forward network, which neurons it kept), with the parameters of the successor's layers and of the whole
model, the dev score's median, min and max over seeds, and the median measured inference speed-up. Written by
``theseus_pl.app.report`` when the runs it reads have more than one successor shape (``sweep/depth_width``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from theseus_pl.app.results import RunResults

SHAPE_COLUMNS = [
    "task", "method", "layers", "FFN width", "hidden size", "neurons kept", "layer params (M)", "params (M)",
    "median", "min", "max", "seeds", "speed-up",
]  # fmt: skip


def _shape_key(run: RunResults) -> tuple[Any, ...] | None:
    shape, predecessor = run.successor.shape, run.predecessor.shape
    if shape is None or predecessor is None:
        return None  # results written before successors had shapes
    narrowed = shape.intermediate_size != predecessor.intermediate_size
    kept = run.settings.get("theseus.successor.importance") if narrowed else None
    return run.task, run.method, shape.layers, shape.intermediate_size, shape.hidden_size, kept or ""


def shape_rows(runs: list[RunResults]) -> list[dict[str, Any]]:
    """One row per task, method and successor shape, with its parameters, score spread and speed-up; empty when
    every run's successor has the same shape (there is nothing to compare)."""
    groups: dict[tuple[Any, ...], list[RunResults]] = defaultdict(list)
    for run in runs:
        key = _shape_key(run)
        if key is not None:
            groups[key].append(run)
    if len({key[2:] for key in groups}) < 2:
        return []
    rows = []
    for (task, method, layers, width, hidden, kept), group in groups.items():
        scores = [run.successor.score for run in group]
        speedups = [run.speedup for run in group if run.speedup is not None]
        rows.append({
            "task": task, "method": method, "layers": layers, "FFN width": width, "hidden size": hidden,
            "neurons kept": kept,
            "layer params (M)": _millions(group[0].params.successor_layers),
            "params (M)": _millions(group[0].params.successor),
            "median": statistics.median(scores), "min": min(scores), "max": max(scores),
            "seeds": " ".join(sorted(str(run.settings.get("seed", "")) for run in group)),
            "speed-up": f"{statistics.median(speedups):.2f}x" if speedups else "",
        })  # fmt: skip
    return sorted(rows, key=lambda r: (r["task"], r["method"], r["layers"], -(r["FFN width"] or 0), r["neurons kept"]))


def _millions(count: int | None) -> str:
    return "" if count is None else f"{count / 1e6:.2f}"
