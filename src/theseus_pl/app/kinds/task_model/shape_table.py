"""The depth-against-width table: runs whose successors differ in shape, side by side.

One row per task, method and successor shape (layers, feed-forward width, hidden width and, for a narrowed
feed-forward network, which neurons it kept) at the shape's best grid point, as the protocol's table chooses a cell's:
the parameters of the successor's layers and of the whole model, the dev score's median, min and max over the point's
seeds (none where a seed has no score), the settings that set the point apart, and the median measured inference
speed-up (none where a seed has none, as one timed on a busy machine leaves it: the other seeds' would read as every
seed's, beside the seeds the score is over). Written by ``theseus_pl.app.report.tables`` when the runs it reads have
more than one successor shape (``sweep/depth_width``).
"""

from __future__ import annotations

import pandas as pd

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.report.over_seeds import best_points, point_columns, spread_over_seeds

SHAPE = ["layers", "FFN width", "hidden size", "neurons kept"]


def shape_table(runs: list[TaskModelResults]) -> pd.DataFrame:
    """One row per task, method and successor shape, at its best grid point (:func:`best_points`, as the protocol's
    table chooses a cell's), with its parameters, score spread over that point's seeds, the settings that set the
    point apart from the shape's others (``grid point``) and its speed-up's median over those seeds
    (:func:`spread_over_seeds`: none where a seed has none); empty when every run's successor has the same shape
    (there is nothing to compare). Runs written before successors had shapes are left out."""
    shaped = [run for run in runs if run.successor.shape is not None and run.predecessor.shape is not None]
    frame = pd.DataFrame({
        "task": [run.task for run in shaped],
        "method": [run.method for run in shaped],
        "layers": pd.array([run.successor.shape.layers for run in shaped], dtype="Int64"),
        "FFN width": pd.array([run.successor.shape.intermediate_size for run in shaped], dtype="Int64"),
        "hidden size": pd.array([run.successor.shape.hidden_size for run in shaped], dtype="Int64"),
        "neurons kept": [_neurons_kept(run) for run in shaped],
        "layer params (M)": [_millions(run.params.successor_layers) for run in shaped],
        "params (M)": [_millions(run.params.successor) for run in shaped],
        "score": pd.array([run.successor.score for run in shaped], dtype=float),
        "speed-up": pd.array([run.speedup for run in shaped], dtype=float),
        **point_columns(shaped),
    })  # fmt: skip
    if len(frame[SHAPE].drop_duplicates()) < 2:
        return pd.DataFrame()
    cells = ["task", "method", *SHAPE]
    groups = frame.groupby([*cells, "point"], sort=False, dropna=False)
    points = groups.agg(**{"layer params (M)": ("layer params (M)", "first"), "params (M)": ("params (M)", "first")})
    points["speed-up"] = spread_over_seeds(groups["speed-up"])["median"]  # none where a seed's was left out
    table = best_points(frame, cells).join(points, on=[*cells, "point"])
    table["speed-up"] = table["speed-up"].map(lambda speedup: "" if pd.isna(speedup) else f"{speedup:.2f}x")
    columns = [*cells, "layer params (M)", "params (M)", "median", "min", "max", "seeds", "grid point", "speed-up"]
    return table[columns].sort_values(["task", "method", "layers", "FFN width", "neurons kept"], key=_widest_first)


def _widest_first(column: pd.Series) -> pd.Series:
    """The sort key of a column: the widest feed-forward network first (one without a width last); others as they
    are. Shapes equal in all these (differing in hidden width) keep the order of the runs."""
    return -column.fillna(0) if column.name == "FFN width" else column


def _neurons_kept(run: TaskModelResults) -> str:
    """How a narrowed feed-forward network chose its neurons; empty for whole layers."""
    narrowed = run.successor.shape.intermediate_size != run.predecessor.shape.intermediate_size
    return (run.settings.get("theseus.successor.importance") if narrowed else None) or ""


def _millions(count: int | None) -> str:
    return "" if count is None else f"{count / 1e6:.2f}"
