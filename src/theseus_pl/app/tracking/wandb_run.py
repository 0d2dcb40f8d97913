"""What a finished job leaves in its W&B run, and that the run ends with its job, failed or not.

The run's summary holds the final numbers (``final/*``, with ``final/best_step``, where the best ``val/score`` was)
and the best ``val/score``; a table compares predecessor and successor (the compression card), and a one-row table
places the run on the score against speed-up plane (``score_vs_speedup``: the dashboard's workspace joins every run's
row; ``python -m theseus_pl.dashboard``); ``results.json``, the composed config and the successor's model card are
saved with the run; with ``logger.wandb.log_model=true`` the exported successor becomes a model artifact. Every
call here is guarded: a W&B problem becomes a warning and an entry in ``results.json``, never a lost run.
"""

from __future__ import annotations

import logging
import shutil
import traceback
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger, WandbLogger

from theseus_pl.app.results.envelope import WandbLink
from theseus_pl.app.results.task_model import TaskModelResults

log = logging.getLogger(__name__)


def wandb_run(loggers: list[Logger]) -> Any | None:
    """The job's W&B run, or None when W&B is off or could not start."""
    for logger in loggers:
        if isinstance(logger, WandbLogger):
            return logger.experiment
    return None


def run_link(run: Any | None) -> WandbLink | None:
    """Where the run lives, for ``results.json``: id, name, group, URL (None offline) and local folder."""
    if run is None:
        return None
    return WandbLink(
        id=run.id,
        name=run.name,
        group=run.group or None,
        url=None if run.offline else run.url,
        dir=str(Path(run.dir).parent),  # the run's folder; W&B's run.dir is its files/ subfolder
    )


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


def save_files(run: Any, files: dict[str, Path]) -> None:
    """Copies, not links, of the files with the run: an offline run folder holds everything `wandb sync` uploads."""
    for name, source in files.items():
        if source.is_file():
            shutil.copyfile(source, Path(run.dir) / name)
            run.save(str(Path(run.dir) / name), base_path=run.dir, policy="now")


def finish(run: Any | None, error: BaseException | None = None) -> None:
    """End the run with its job: finished, or failed with the error in its summary, so the next job starts afresh."""
    if run is None:
        return
    try:
        if error is not None:
            run.summary["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()
        run.finish(exit_code=0 if error is None else 1)
    except Exception as problem:  # the job's own outcome must not be masked by W&B
        log.warning("Could not finish the W&B run (%s: %s).", type(problem).__name__, problem)
