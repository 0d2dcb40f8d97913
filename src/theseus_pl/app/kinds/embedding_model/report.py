"""The sentence-embedding runs' part of ``python -m theseus_pl.report``: a table of every run.

A sentence-embedding run's ``results.json`` (:class:`~.record.EmbeddingModelResults`,
``kind`` ``embedding_model``) is scored on STS-B dev for both models and on its fidelity to the teacher's vectors, so
its table has a line per run (method, seed, steps, the layers kept) with both STS-B scores, the share kept, the
successor's mean cosine and squared error to the teacher's vectors, its speed-up at each batch size timed, and what it
trained on (the teacher's vectors, or labelled pairs: the same method names serve both). A
speed-up timed while other processes kept the machine busy is not the model's: its cell is left empty, and a warning
names the run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from theseus_pl.app.kinds.embedding_model.record import EmbeddingModelResults
from theseus_pl.app.report.files import write_markdown_and_csv
from theseus_pl.app.results.number_text import known

STEM = "embedding_table"  # embedding_table.md and embedding_table.csv
TEACHER_VECTORS, LABELLED_PAIRS = "teacher's vectors", "labelled pairs"  # a run's "trained on"


def embedding_model_table(runs: list[EmbeddingModelResults]) -> pd.DataFrame:
    """One line per run, sorted by its layers (most first), what it trained on, method, the layers kept, steps and
    seed. The fidelity
    figures are text in the precision they need (an MSE per dimension is near 1e-4, a mean cosine near 1), since the
    report's files give numbers to two decimals."""
    rows = []
    for run in runs:
        successor, speed = run.successor, run.trusted_speed or {}
        before, after = run.predecessor.sts, successor.sts
        rows.append({
            "method": run.method, "seed": run.seed, "steps": run.steps, "layers": successor.layers,
            "kept": " ".join(map(str, run.kept_layers or [])),
            "STS-B predecessor": _number(before), "STS-B successor": _number(after),
            "retained %": _number(run.retained),
            "cosine": f"{successor.cosine:.4f}" if known(successor.cosine) else "",
            "MSE": f"{successor.mse:.2e}" if known(successor.mse) else "",
            **{f"batch-{size} speed-up": speed.get(f"batch{size}_speedup", float("nan")) for size in _sizes(runs)},
            "trained on": TEACHER_VECTORS if run.data.train_pairs is None else LABELLED_PAIRS,
            "folder": str(run.folder or ""),
        })  # fmt: skip
    table = pd.DataFrame(rows)
    return table.sort_values(
        ["layers", "trained on", "method", "kept", "steps", "seed"],
        ascending=[False, False, True, True, True, True],
        kind="stable",
    ).reset_index(drop=True)


def embedding_model_warnings(runs: list[EmbeddingModelResults]) -> list[str]:
    """What makes the lines incomparable or a figure missing: different predecessors (or STS-B pairs), speed timed on
    a busy machine."""
    warnings = []
    if len({(round(run.predecessor.sts, 6), run.data.sts_pairs) for run in runs if known(run.predecessor.sts)}) > 1:
        warnings.append(
            "The sentence-embedding runs' predecessors scored differently on STS-B dev: their successors compare only "
            "with their own predecessor (give every run the same model and data)."
        )
    busy = [str(run.folder or run.method) for run in runs if run.speed and run.trusted_speed is None]
    if busy:
        warnings.append(
            f"{len(busy)} sentence-embedding run(s) timed their speed while other processes kept the machine busy: "
            f"their speed-ups are left out of the table ({', '.join(busy)})."
        )
    return warnings


def write_embedding_model_report(runs: list[EmbeddingModelResults], output: Path) -> tuple[list[Path], list[str]]:
    """``embedding_table.md``/``.csv`` from the runs' records; the files written and the comparison's warnings."""
    return write_markdown_and_csv(embedding_model_table(runs), output, STEM), embedding_model_warnings(runs)


def _sizes(runs: list[EmbeddingModelResults]) -> list[int]:
    """The batch sizes any run was timed at, in order: 1 and ``benchmark.batch_size`` (``batch32_speedup``)."""
    keys = {key for run in runs for key in (run.speed or {}) if key.startswith("batch") and key.endswith("_speedup")}
    return sorted(int(key.removeprefix("batch").removesuffix("_speedup")) for key in keys)


def _number(value: float | None) -> float:
    """A score as a number, a missing one (null in the file) as NaN: an empty cell."""
    return float(value) if known(value) else float("nan")
