"""Small pieces of text every kind of model card writes the same way."""

from __future__ import annotations

from theseus_pl.app.results.envelope import Hardware
from theseus_pl.app.results.number_text import shown
from theseus_pl.app.results.search_finding import SearchFinding
from theseus_pl.deployment.targets import points_in_words


def quoted(repo_id: str | None, placeholder: str) -> str:
    """Where from_pretrained loads from: the hub repo once published, else the placeholder for the local folder."""
    return f'"{repo_id or placeholder}"'


def number(value: float | None, digits: int) -> str:
    """``value`` to ``digits`` decimals, or n/a (:func:`~theseus_pl.app.results.number_text.shown`: the card is
    written before results.json turns a NaN into null)."""
    return shown(value, f".{digits}f")


def timed_on_a_busy_machine(what: str, cores: float) -> str:
    """The words for ``what`` ("Its speed", "its speed-up") timed twice while other processes kept ``cores`` of the
    machine busy (core.timing): measured, and left out because the figure is not the model's, never shown."""
    return (
        f"{what} was timed while other processes kept {cores:.1f} cores of the machine busy, twice, and is left out: "
        "not the model's alone"
    )


def found_by_search(found: SearchFinding | None, hardware: Hardware | None) -> str:
    """The search that picked this run, its floor, the machine it timed on (``hardware``: the run's) and its front;
    nothing for a run no search picked."""
    if found is None:
        return ""
    machine = hardware.cpu if hardware is not None else "the machine the search ran on"
    rows = "\n".join(
        f"| {point.trial}{' (this model)' if point.trial == found.trial else ''} | {point.shape} | "
        f"{number(point.score, 2)} | {number(point.latency_ms, 2)} |"
        for point in found.front
    )
    return f"""
## Found by a search

Trial {found.trial} of a search of {found.trials} trials (theseus_pl's `+search`, Optuna study `{found.study}`): the
fastest successor whose dev score stays within {points_in_words(found.max_score_drop)} of the predecessor's
{number(found.predecessor_score, 2)} (the floor, {number(found.floor, 2)}), each trial timed at batch
{found.batch_size} on the dev rows' own lengths on {machine}. Its Pareto front of dev score against milliseconds a
call, fastest first:

| trial | depth, width, runtime | dev score (x100) | ms a call |
|---|---|---|---|
{rows}
"""
