"""Small pieces of text every kind of model card writes the same way."""

from __future__ import annotations

import math


def quoted(repo_id: str | None, placeholder: str) -> str:
    """Where from_pretrained loads from: the hub repo once published, else the placeholder for the local folder."""
    return f'"{repo_id or placeholder}"'


def known(value: float | None) -> bool:
    """A number to show: not missing, and finite (the card is written before results.json turns NaN into null)."""
    return value is not None and math.isfinite(value)


def number(value: float | None, digits: int) -> str:
    return f"{value:.{digits}f}" if known(value) else "n/a"
