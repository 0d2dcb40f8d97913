"""Every report table written twice, for people (Markdown) and for programs (CSV), with the same cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

PREDECESSOR = "predecessor"  # the predecessor's row in every report table, beside the methods' rows


def write_markdown_and_csv(table: pd.DataFrame, output: Path, stem: str) -> list[Path]:
    """``<stem>.md`` (a Markdown table) and ``<stem>.csv`` (as the csv module writes it) with the same header and
    cells: numbers to two decimals, missing values empty, anything else as text."""
    cells = table.map(_cell)
    header = "| " + " | ".join(cells.columns) + " |\n|" + "---|" * len(cells.columns) + "\n"
    body = "".join("| " + " | ".join(line) + " |\n" for line in cells.itertuples(index=False))
    (output / f"{stem}.md").write_text(header + body)
    cells.to_csv(output / f"{stem}.csv", index=False, lineterminator="\r\n")
    return [output / f"{stem}.md", output / f"{stem}.csv"]


def _cell(value: Any) -> str:
    return "" if pd.isna(value) else f"{value:.2f}" if isinstance(value, float) else str(value)
