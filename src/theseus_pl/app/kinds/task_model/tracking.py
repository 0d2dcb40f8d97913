"""What a finished task-model job leaves in its W&B run: the summary holds the final numbers (``final/*``, with
``final/best_step``, where the best ``val/score`` was); a table compares predecessor and successor (the compression
card), and a one-row table places the run on the score against speed-up plane (``score_vs_speedup``: the dashboard's
workspace joins every run's row; ``python -m theseus_pl.dashboard``); with ``logger.wandb.log_model=true`` the
exported successor becomes a model artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.tracking.wandb_run import save_files


def compression_card(results: TaskModelResults) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows (predecessor, successor): headline score, every metric, layers, parameters, speed-up."""
    predecessor, successor = results.predecessor, results.successor
    metrics = sorted({*predecessor.metrics, *successor.metrics})
    columns = ["model", "score", *metrics, "layers", "parameters", "speedup"]
    rows = [
        ["predecessor", predecessor.score, *(predecessor.metrics.get(name) for name in metrics),
         results.layers.predecessor, results.params.predecessor, 1.0],
        ["successor", successor.score, *(successor.metrics.get(name) for name in metrics),
         results.layers.successor, results.params.successor, results.speedup],
    ]  # fmt: skip
    return columns, rows


SCORE_VS_SPEEDUP = ["task", "method", "shape", "successor score", "retained", "speed-up", "successor parameters"]


def score_vs_speedup(results: TaskModelResults) -> list[Any]:
    """The run's row of the ``score_vs_speedup`` table (columns ``SCORE_VS_SPEEDUP``)."""
    shape = f"{results.layers.successor} layers{results.widths_clause()}"
    return [results.task, results.method, shape, results.successor.score, results.retained, results.speedup,
            results.params.successor]  # fmt: skip


def publish(run: Any, results: TaskModelResults, files: dict[str, Path], successor_dir: Path, log_model: bool) -> None:
    """Summary, compression card, files and (optionally) the successor artifact; raises on a W&B failure."""
    import wandb

    run.summary.update(results.summary())
    columns, rows = compression_card(results)
    run.log({
        "compression_card": wandb.Table(columns=columns, data=rows),
        "score_vs_speedup": wandb.Table(columns=SCORE_VS_SPEEDUP, data=[score_vs_speedup(results)]),
    })  # fmt: skip
    save_files(run, files)
    if log_model:
        artifact = wandb.Artifact(
            f"successor-{run.id}",
            type="model",
            description=f"{results.task} successor, {results.layers.successor} layers ({results.method})",
            metadata={"task": results.task, "method": results.method, "score": results.successor.score},
        )
        artifact.add_dir(str(successor_dir))
        run.log_artifact(artifact)
