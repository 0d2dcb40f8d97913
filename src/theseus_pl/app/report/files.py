"""Every report table written twice, for people (Markdown) and for programs (CSV), with the same cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

PREDECESSOR = "predecessor"  # the predecessor's row in every report table, beside the methods' rows
# Every file a report may write into its folder (which ones depends on the runs: shapes, budgets, decoder LMs,
# sentence-embedding models).
REPORT_FILES = (
    *(f"{stem}.{suffix}" for stem in ("table", "best_settings", "runs", "shapes", "budget", "lm_table", "lm_runs",
                                      "embedding_table") for suffix in ("md", "csv")),
    "budget_*.png", "p_over_steps.png", "score_vs_rate.png", "perplexity_vs_layers.png", "score_vs_tokens.png",
)  # fmt: skip


def remove_stale_files(output: Path, written: list[Path]) -> list[Path]:
    """The files an earlier report left in ``output`` that this one did not write (a decoder-LM table beside a
    report of task-model runs, say), removed so that the folder holds one report; the files removed."""
    stale = {path for pattern in REPORT_FILES for path in output.glob(pattern)} - set(written)
    for path in stale:
        path.unlink()
    return sorted(stale)


def write_markdown_and_csv(table: pd.DataFrame, output: Path, stem: str) -> list[Path]:
    """``<stem>.md`` (a Markdown table) and ``<stem>.csv`` (as the csv module writes it) with the same header and
    cells: numbers to two decimals, missing values empty, anything else as text."""
    (output / f"{stem}.md").write_text(markdown_table(table))
    table.map(_cell).to_csv(output / f"{stem}.csv", index=False, lineterminator="\r\n")
    return [output / f"{stem}.md", output / f"{stem}.csv"]


def markdown_table(table: pd.DataFrame) -> str:
    """``table`` as the Markdown :func:`write_markdown_and_csv` writes (a report's file, a W&B report's block)."""
    cells = table.map(_cell)
    header = "| " + " | ".join(cells.columns) + " |\n|" + "---|" * len(cells.columns) + "\n"
    return header + "".join("| " + " | ".join(line) + " |\n" for line in cells.itertuples(index=False))


def _cell(value: Any) -> str:
    return "" if pd.isna(value) else f"{value:.2f}" if isinstance(value, float) else str(value)
