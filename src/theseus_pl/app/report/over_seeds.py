"""A grid point's spread over its seeds, as every report table gives it, and the best grid point of a table's cell."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from pandas.core.groupby import SeriesGroupBy

from theseus_pl.app.report.tables import settings_by_key
from theseus_pl.app.results.envelope import RunRecord


def spread_over_seeds(values: SeriesGroupBy) -> pd.DataFrame:
    """Each group's ``median``, ``min`` and ``max`` over its seeds, left empty where a seed has no number (null in its
    record: a run that scored nothing): pandas skips it, and the other seeds' figures would read as every seed's."""
    stats = values.agg(["median", "min", "max", "count", "size"])
    return stats[["median", "min", "max"]].where(stats["count"] == stats["size"])


def in_seed_order(seeds: Iterable[Any]) -> list[str]:
    """The seeds as text in number order (``1 2 10``, where text's order is ``1 10 2``); a seed that is no whole number
    (a record's own label) after the numbers, in text order."""
    texts = [str(seed) for seed in seeds]
    return sorted(texts, key=lambda seed: (0, int(seed), seed) if re.fullmatch("-?[0-9]+", seed) else (1, 0, seed))


def point_columns(runs: Sequence[RunRecord]) -> dict[str, list[Any]]:
    """What :func:`best_points` reads of each run besides its score, as a frame's columns: its ``seed`` as text (the
    record's own where its settings lack one), its ``settings`` but the seed with its ``method``, and those as JSON
    (``point``: the grid point it ran). Two methods whose records keep the same settings (curriculum and
    anti-curriculum replacing: the schedule's kind is the method's) are two points, not one pooling their seeds,
    wherever a cell holds both (``--rows theseus.init``)."""
    settings = [{"method": run.method} | {key: v for key, v in run.settings.items() if key != "seed"} for run in runs]
    return {
        "seed": [str(run.settings.get("seed", run.seed)) for run in runs],
        "settings": settings,
        "point": [json.dumps(point, sort_keys=True) for point in settings],
    }


def best_points(frame: pd.DataFrame, cells: list[str]) -> pd.DataFrame:
    """Per cell (each distinct value of the ``cells`` columns of ``frame``, a line a run with its ``score``, ``seed``,
    ``settings`` but the seed and those as JSON, ``point``), the grid point with the best median over seeds (the
    first of equals): the cell, its ``point``, ``median``, ``min`` and ``max``, ``seeds``, ``settings`` and, as
    ``grid point``, the settings that set it apart from the cell's other points (a setting the point lacks is left
    out). A seed without a score (null in ``results.json``) leaves its point without a median, min and max rather
    than flattering it: such a point is chosen only where every point is one. A point run at fewer seeds than another
    of its cell (a grid explored at one seed beside a point run at three) is chosen only where none has more: one
    lucky seed is no median. A scored point is chosen before one without a median whatever their seeds (a point of
    three seeds, one unscored, beside one scored at two left the cell empty).

    Each point comes with its seeds as a set too (``seed set``: what a report compares between its cells), and as
    ``repeated`` each seed it holds more than one run of, with those runs' ``folder`` (where the frame has one; empty
    text otherwise): copied folders, or a swept setting the runs' records do not keep, put two runs of a seed at one
    point, and its median, min and max then count that seed twice while ``seeds`` names it once."""
    points = frame.groupby([*cells, "point"], sort=False, dropna=False)
    stats = spread_over_seeds(points["score"])
    stats["seed set"] = points["seed"].agg(frozenset)
    stats["seed_count"] = stats["seed set"].map(len)
    stats["seeds"] = stats["seed set"].map(lambda seeds: " ".join(in_seed_order(seeds)))
    folders = frame["folder"] if "folder" in frame else pd.Series("", index=frame.index)
    stats["repeated"] = points["seed"].agg(lambda seeds: _repeated(seeds, folders))
    stats["settings"] = points["settings"].first()
    stats["scored"] = stats["median"].notna()
    ranked = stats.sort_values(["scored", "seed_count", "median"], ascending=False, kind="stable", na_position="last")
    best = ranked.reset_index().drop_duplicates(cells)
    varied = settings_by_key(frame["settings"]).groupby([frame[cell] for cell in cells], dropna=False).nunique() > 1
    varied_in_cell = varied.loc[pd.MultiIndex.from_frame(best[cells])].to_dict("records")
    best["grid point"] = [
        " ".join(f"{key}={settings[key]}" for key in sorted(settings) if varies[key])
        for settings, varies in zip(best["settings"], varied_in_cell, strict=True)
    ]
    return best


def _repeated(seeds: pd.Series, folders: pd.Series) -> dict[str, list[str]]:
    """Each of one point's seeds that more than one of its runs ran, with those runs' folders (by the frame's index)."""
    counts = seeds.value_counts()
    return {seed: list(folders[seeds.index[seeds == seed]]) for seed in in_seed_order(counts[counts > 1].index)}
