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


def timed_on_a_busy_machine(what: str, cores: float) -> str:
    """The words for ``what`` ("Its speed", "its speed-up") timed twice while other processes kept ``cores`` of the
    machine busy (core.timing): measured, and left out because the figure is not the model's, never shown."""
    return (
        f"{what} was timed while other processes kept {cores:.1f} cores of the machine busy, twice, and is left out: "
        "not the model's alone"
    )
