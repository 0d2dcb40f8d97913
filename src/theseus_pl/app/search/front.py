"""A search's answer from its finished trials: the Pareto front of dev score against milliseconds a call, and the
fastest trial within the score floor. Plain functions of the measured points, so that planted points test them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from theseus_pl.app.config.command_line import override_key
from theseus_pl.app.results.search_finding import ReferencePoint
from theseus_pl.deployment.targets import reaches


@dataclass(frozen=True)
class TrialPoint:
    """One finished trial as the search weighs it: its shipped model's dev score and time, and what made it."""

    number: int  # Optuna's trial number (also its job's number in the sweep folder)
    score: float  # the shipped model's dev score (x100)
    latency_ms: float  # its p50 a call at the serving pattern's batch size, on the dev rows' own lengths
    throughput_ms: float | None  # its p50 a batch of the other pattern's size, recorded beside it
    settings: Mapping[str, Any]  # the trial's values of the searched keys
    target: str  # the runtime deploy chose for it (onnx_int8, openvino_int8, pytorch_successor, ...)
    folder: str  # its run folder
    layers: int  # the successor's depth
    intermediate_size: int | None  # its feed-forward width
    # Its fastest deployed model at that batch size, within the score drop or not: the least time its shape takes
    # (None in studies written before it was kept).
    fastest_ms: float | None = None


def pareto_front(points: Sequence[TrialPoint]) -> list[TrialPoint]:
    """The points no other point beats on both objectives (a higher or equal score and a lower or equal time, one
    of them strictly), fastest first. Points that are not numbers are never on it."""
    measured = [point for point in points if _finite(point)]
    front = [point for point in measured if not any(_dominates(other, point) for other in measured)]
    return sorted(front, key=lambda point: (point.latency_ms, -point.score, point.number))


def fastest_within(points: Sequence[TrialPoint], floor: float, max_ms: float | None = None) -> TrialPoint | None:
    """The fastest point whose score is at least ``floor`` and, with a latency target, whose time is at most
    ``max_ms`` (the best score among equally fast ones, then the earliest); None where none reaches both."""
    kept = [point for point in points if _finite(point) and reaches(point.score, floor)
            and (max_ms is None or point.latency_ms <= max_ms)]  # fmt: skip
    return min(kept, key=lambda point: (point.latency_ms, -point.score, point.number), default=None)


def is_shape_key(key: str) -> bool:
    """Whether a searched key sets the successor's shape (its depth, widths or module), which sets its time."""
    key = override_key(key)
    return key == "theseus.successor_layers" or key.startswith("theseus.successor.")


def shape_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The searched values that set the successor's shape, and with it its time."""
    return {key: value for key, value in values.items() if is_shape_key(key)}


def shape_name(shape: Mapping[str, Any]) -> str:
    """A shape in words: ``theseus.successor_layers=2, theseus.successor.intermediate_size=384``."""
    return ", ".join(f"{key.lstrip('+~')}={value}" for key, value in shape.items()) or "its shape"


@dataclass(frozen=True)
class UntrainedShape:
    """A shape of the space deployed and timed before any trial trained (``hydra.sweeper.max_latency_ms``): its
    fastest deployed runtime's p50 a call at the serving batch size, on the dev rows' own lengths. Untrained weights
    take a trained model's time: the time is the shape's."""

    shape: Mapping[str, Any]  # its values of the space's shape keys
    ms: float
    target: str  # the runtime that took it


def unmet_target(shapes: Sequence[UntrainedShape], max_ms: float, margin: float | None) -> str | None:
    """Why no shape can meet the latency target, naming the fastest untrained shape; None where one is within
    ``margin`` (a share: the timing's noise) of it, or none was timed."""
    fastest = min(shapes, key=lambda shape: shape.ms, default=None)
    if fastest is None or fastest.ms <= max_ms * (1 + (margin or 0)):
        return None
    return (
        f"hydra.sweeper.max_latency_ms={max_ms:g}: no shape of the search meets it; the fastest, "
        f"{shape_name(fastest.shape)}, takes {fastest.ms:.2f} ms a call untrained ({fastest.target}). Raise the "
        "target, or search smaller shapes."
    )


def over_the_target(
    values: Mapping[str, Any], shapes: Sequence[UntrainedShape], max_ms: float | None, margin: float | None
) -> str | None:
    """Why a trial of these searched ``values`` cannot be the pick, in words: its shape, timed untrained, took more
    than ``margin`` over the latency target ``max_ms``. None where it may: no target, or its shape not timed."""
    shape = shape_of(values)
    timed = [untrained.ms for untrained in shapes if dict(untrained.shape) == shape]
    if max_ms is None or not timed or timed[0] <= max_ms * (1 + (margin or 0)):
        return None
    return (
        f"{shape_name(shape)} takes {timed[0]:.2f} ms a call untrained, over hydra.sweeper.max_latency_ms="
        f"{max_ms:g}: it cannot be the pick"
    )


def slower_than_the_pick(
    values: Mapping[str, Any], points: Sequence[TrialPoint], pick: TrialPoint | None, margin: float | None
) -> str | None:
    """Why a trial of these searched ``values`` cannot be the pick, in words: an earlier trial of its shape (the same
    values of its shape keys) was timed, in its shape's fastest runtime, more than ``margin`` (a share: 0.1 is 10 %,
    the timing's noise) slower than the pick; the pick only gets faster. None where it may be the pick: no pick yet,
    its shape not timed yet, or ``margin`` None (every trial trains)."""
    if pick is None or margin is None:
        return None
    shape = shape_of(values)
    timed = [
        _least_time(point)
        for point in points
        if {key: point.settings.get(key) for key in shape} == shape and math.isfinite(_least_time(point))
    ]
    if not timed or min(timed) <= pick.latency_ms * (1 + margin):
        return None
    return (
        f"{shape_name(shape)} took {min(timed):.2f} ms a call at best in an earlier trial, more than {margin:.0%} "
        f"slower than the pick's {pick.latency_ms:.2f} ms (trial {pick.number}): it cannot be the pick"
    )


def _least_time(point: TrialPoint) -> float:
    return point.latency_ms if point.fastest_ms is None else min(point.fastest_ms, point.latency_ms)


def front_table(
    points: Sequence[TrialPoint],
    pick: TrialPoint | None,
    floor: float,
    references: Sequence[ReferencePoint] = (),
    max_ms: float | None = None,
) -> pd.DataFrame:
    """Every point, fastest first: its searched values, shape, runtime, score, time, whether it is within the floor
    (and the latency target ``max_ms``, where there is one) and on the front, and which one is the pick; each
    reference model after them, marked so (no trial)."""
    on_front = {point.number for point in pareto_front(points)}
    keys = list(dict.fromkeys(key for point in points for key in point.settings))
    rows = [
        {
            "trial": point.number,
            **{key: _shown(point.settings.get(key)) for key in keys},
            "layers": point.layers,
            "ffn width": point.intermediate_size,
            "runtime": point.target,
            "score": point.score,
            "ms a call": point.latency_ms,
            "within the floor": "yes" if _finite(point) and reaches(point.score, floor) else "no",
            **({} if max_ms is None else {"within the target": "yes" if point.latency_ms <= max_ms else "no"}),
            "on the front": "yes" if point.number in on_front else "",
            "pick": "pick" if pick is not None and point.number == pick.number else "",
        }
        for point in sorted(points, key=lambda point: (_sortable(point.latency_ms), point.number))
    ]
    blank = dict.fromkeys(rows[0] if rows else (), "")  # a trial's columns, empty: its whole numbers stay whole
    rows += [
        {**blank, "runtime": reference.label, "score": reference.score, "ms a call": reference.latency_ms,
         "within the floor": "yes" if reaches(reference.score, floor) else "no", "on the front": "reference"}
        for reference in references
    ]  # fmt: skip
    return pd.DataFrame(rows)


def untrained_table(shapes: Sequence[UntrainedShape], max_ms: float | None, margin: float | None) -> pd.DataFrame:
    """Every shape timed untrained, fastest first: its shape keys' values, the runtime that took it, its ms a call,
    and whether it is within the latency target (the timing's noise, ``margin``, allowed)."""
    return pd.DataFrame([
        {**{override_key(key): value for key, value in shape.shape.items()}, "runtime": shape.target,
         "ms a call": shape.ms,
         "within the target": "" if max_ms is None else "yes" if shape.ms <= max_ms * (1 + (margin or 0)) else "no"}
        for shape in sorted(shapes, key=lambda shape: shape.ms)
    ])  # fmt: skip


def plot_front(
    points: Sequence[TrialPoint],
    pick: TrialPoint | None,
    floor: float,
    path: Path,
    references: Sequence[ReferencePoint] = (),
    max_ms: float | None = None,
) -> Path:
    """``path`` (a PNG): every trial's score against its time, the front joined, each front point labelled with its
    depth, width and runtime, the floor (and the latency target) drawn, the pick ringed, and each reference model a
    labelled diamond (the time axis logarithmic where one is 20x faster than the trials)."""
    import matplotlib

    matplotlib.use("Agg")  # no screen: files only
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    measured = [point for point in points if _finite(point)]
    axes.scatter([p.latency_ms for p in measured], [p.score for p in measured], color="0.6", label="trials")
    front = pareto_front(points)
    axes.plot([p.latency_ms for p in front], [p.score for p in front], "o-", color="C0", label="Pareto front")
    for point in front:
        axes.annotate(label(point), (point.latency_ms, point.score), textcoords="offset points", xytext=(4, 4),
                      fontsize=7)  # fmt: skip
    axes.axhline(floor, color="C3", linestyle="--", linewidth=1, label=f"score floor {floor:.2f}")
    if max_ms is not None:
        axes.axvline(max_ms, color="C1", linestyle=":", linewidth=1, label=f"latency target {max_ms:g} ms")
    if pick is not None:
        axes.scatter([pick.latency_ms], [pick.score], s=160, facecolors="none", edgecolors="C3", label="pick")
    for reference in references:
        axes.scatter([reference.latency_ms], [reference.score], marker="D", color="C2", label=reference.label)
    times = [point.latency_ms for point in measured] + [reference.latency_ms for reference in references]
    if times and min(times) > 0 and max(times) > 20 * min(times):
        axes.set_xscale("log")
        axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # the decades alone: no crowded labels
    axes.set_xlabel("ms a call (p50, dev rows at their own lengths)")
    axes.set_ylabel("dev score")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def label(point: TrialPoint) -> str:
    """A point in a few words: ``3 layers, ffn 384, onnx_int8``."""
    width = f", ffn {point.intermediate_size}" if point.intermediate_size is not None else ""
    return f"{point.layers} layers{width}, {point.target}"


def _dominates(one: TrialPoint, other: TrialPoint) -> bool:
    no_worse = one.score >= other.score and one.latency_ms <= other.latency_ms
    return no_worse and (one.score > other.score or one.latency_ms < other.latency_ms)


def _finite(point: TrialPoint) -> bool:
    return math.isfinite(point.score) and math.isfinite(point.latency_ms)


def _shown(value: Any) -> Any:
    """A searched value as the table shows it: a drawn number in three figures (a learning rate of 8.2e-05, not the
    tables' two decimals, 0.00); its every digit is in ``search.json``."""
    return f"{value:.3g}" if isinstance(value, float) else value


def _sortable(value: float) -> float:
    return value if math.isfinite(value) else math.inf
