"""What every kind's finished job leaves in its W&B run, and that the run ends with its job, failed or not.

The run's link goes into ``results.json``; ``results.json``, the composed config and the successor's model card are
saved with the run as copies (:func:`save_files`); each kind logs its own summary and tables (a task model's in
:mod:`~theseus_pl.app.kinds.task_model.tracking`). Every call here is guarded: a W&B problem becomes a warning and an
entry in ``results.json``, never a lost run.
"""

from __future__ import annotations

import logging
import shutil
import traceback
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import Logger, WandbLogger

from theseus_pl.app.results.envelope import WandbLink

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
