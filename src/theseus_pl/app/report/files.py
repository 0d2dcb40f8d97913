"""Every report table written twice, for people (Markdown) and for programs (CSV), with the same cells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

PREDECESSOR = "predecessor"  # the predecessor's row in every report table, beside the methods' rows
# In a report's folder: the names of the files its report wrote, one a line, what the next report there may remove.
MANIFEST = ".report_files"


def remove_stale_files(output: Path, written: list[Path]) -> list[Path]:
    """The files the folder's earlier report wrote (named in its :data:`MANIFEST`) that this one did not write (a
    decoder-LM table beside a report of task-model runs, say), removed so that the folder holds one report; the files
    removed. No other file is touched, whatever its name: a folder no report wrote (or one of before the manifest)
    loses nothing. The manifest then names this report's files."""
    manifest = output / MANIFEST
    named = manifest.read_text().splitlines() if manifest.is_file() else []
    earlier = {output / name for name in named if name and Path(name).name == name}  # in the folder, nowhere else
    stale = {path for path in earlier if path.is_file()} - set(written)
    for path in stale:
        path.unlink()
    manifest.write_text("".join(f"{path.name}\n" for path in written))
    return sorted(stale)


def write_markdown_and_csv(table: pd.DataFrame, output: Path, stem: str) -> list[Path]:
    """``<stem>.md`` (a Markdown table) and ``<stem>.csv`` (as the csv module writes it) with the same header and
    cells: numbers to two decimals (under 0.01, two significant digits), missing values empty, anything else as
    text."""
    (output / f"{stem}.md").write_text(markdown_table(table))
    table.map(_cell).to_csv(output / f"{stem}.csv", index=False, lineterminator="\r\n")
    return [output / f"{stem}.md", output / f"{stem}.csv"]


def markdown_table(table: pd.DataFrame) -> str:
    """``table`` as the Markdown :func:`write_markdown_and_csv` writes (a report's file, a W&B report's block)."""
    cells = table.map(_cell)
    header = "| " + " | ".join(cells.columns) + " |\n|" + "---|" * len(cells.columns) + "\n"
    return header + "".join("| " + " | ".join(line) + " |\n" for line in cells.itertuples(index=False))


def _cell(value: Any) -> str:
    """Two decimals; a number under 0.01 to two significant digits, which two decimals would write as 0.00 (a static
    embedding model's 0.004 ms a call beside the trials', a KL of 0.003)."""
    if not isinstance(value, float) or pd.isna(value):
        return "" if pd.isna(value) else str(value)
    return f"{value:.2g}" if 0 < abs(value) < 0.01 else f"{value:.2f}"
