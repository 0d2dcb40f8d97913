"""The report's search fronts: each search among the runs, read from its pick's record (its ``search`` block), of
any kind a search weighs (:mod:`~theseus_pl.app.results.search_finding`): one table beside the kinds' own."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from theseus_pl.app.results.envelope import RunRecord
from theseus_pl.app.results.search_finding import SearchableRecord

SEARCH_FRONT = "search_front"  # the table's file stem in the report's folder


def search_front_table(records: Sequence[RunRecord]) -> pd.DataFrame:
    """The Pareto front of each search among ``records`` (those of a kind a search weighs), read from its pick's
    record: a line per point, fastest first, its search named by the pick's folder, its floor beside it; empty
    without a search."""
    rows = [
        {
            "search": f"{found.study} ({record.folder.parent if record.folder else ''})",
            "floor": found.floor,
            "trial": point.trial,
            "depth, width, runtime": point.shape,
            "score": point.score,
            "ms a call": point.latency_ms,
            "pick": "pick" if point.trial == found.trial else "",
        }
        for record in records
        if isinstance(record, SearchableRecord) and (found := record.search) is not None
        for point in found.front
    ]
    return pd.DataFrame(rows, columns=["search", "floor", "trial", "depth, width, runtime", "score", "ms a call",
                                       "pick"])  # fmt: skip
