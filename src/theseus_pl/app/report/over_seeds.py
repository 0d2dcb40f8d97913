"""A grid point's spread over its seeds, as every report table gives it."""

from __future__ import annotations

import pandas as pd
from pandas.core.groupby import SeriesGroupBy


def spread_over_seeds(values: SeriesGroupBy) -> pd.DataFrame:
    """Each group's ``median``, ``min`` and ``max`` over its seeds, left empty where a seed has no number (null in its
    record: a run that scored nothing): pandas skips it, and the other seeds' figures would read as every seed's."""
    stats = values.agg(["median", "min", "max", "count", "size"])
    return stats[["median", "min", "max"]].where(stats["count"] == stats["size"])
