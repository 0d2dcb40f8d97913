"""The run folder as Hydra makes it: refused in one line when it cannot be made, a finished run's record kept, and
known as this command's own or not.

Hydra makes the run folder (``hydra.run.dir``; a sweep's ``hydra.sweep.dir``) and writes the command's config,
overrides and its own settings into ``.hydra/`` before the app is called. Three things follow, each handled here:

- A folder that cannot be made (a parent nobody may write, a file in the way) ends in a ``PermissionError``
  traceback from Hydra; :class:`RunFolderCheck`, a Hydra callback, says so in one line first, with exit status 2.
- A rerun into a folder that holds a run would overwrite that run's record with a command that never ran (or that
  the resume check then refuses); :func:`record_subdir`, ``hydra.output_subdir``, keeps Hydra from writing there.
- A refused run removes its folder, but only one this command made: a folder that held anything before (an earlier
  run killed before its first checkpoint leaves ``.hydra/`` and its log, no more) is not the refusal's to delete.
  :class:`RunFolderCheck` notes, before Hydra makes them, which folders do not exist yet
  (:func:`made_by_this_command`).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

RECORD_SUBDIR = ".hydra"
SEARCH_FOLDER = "search"  # a search's front, plot and pick, in its sweep folder
SEARCH_ANSWER = "search.json"  # in it: the floor, the front, the pick, and each trial ended without a point
_made_here: set[Path] = set()  # run and sweep folders that did not exist as this command started


def last_checkpoint(output_dir: Path) -> Path:
    """Where a run in ``output_dir`` keeps what a rerun resumes from (``callbacks.resume_checkpoint``'s file)."""
    return output_dir / "checkpoints" / "last.ckpt"


def sweep_folder() -> Path | None:
    """The folder of the multirun this job is one of (``hydra.sweep.dir``), absolute; None for a single run."""
    if not HydraConfig.initialized() or (hydra := HydraConfig.get()).mode != RunMode.MULTIRUN:
        return None
    return Path(hydra.sweep.dir).resolve()


def record_subdir(output_dir: str, resume: bool | str) -> str | None:
    """``hydra.output_subdir``: where Hydra records the command that runs in ``output_dir``, or None (it records
    nothing) where the folder holds a run: a finished one (``results.json``), whose record stays its command's
    unless ``resume=force`` redoes it (:func:`record_command` once its checks pass; a redo refused by them left the
    refused command as the old results' record), or an interrupted one that it resumes
    (``checkpoints/last.ckpt``), whose record stays the command that started it: a resume repeats every setting that
    shapes training, or is refused."""
    folder = Path(output_dir)
    finished = (folder / "results.json").is_file()
    resumed = last_checkpoint(folder).is_file() and resume is True
    return None if finished or resumed else RECORD_SUBDIR


def record_command(cfg: DictConfig, output_dir: Path) -> None:
    """Make the record in ``output_dir/.hydra/`` (its config and overrides) this command's: one that resumed and
    finished the run there, or one that redoes it (``resume=force``, the folder made where it had none). Hydra wrote
    nothing as it started (:func:`record_subdir`): the checks had not yet passed. A resume repeats every setting that
    shapes training, but the others may differ (``deploy.onnx=true``, the benchmark), and the record said what the
    first command asked, not what the run did. Nothing outside a Hydra job (a run called from Python)."""
    folder = output_dir / RECORD_SUBDIR
    if not HydraConfig.initialized() or not (folder.is_dir() or cfg.resume == "force"):
        return
    folder.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, folder / "config.yaml")
    OmegaConf.save(OmegaConf.create(list(HydraConfig.get().overrides.task)), folder / "overrides.yaml")


def folder_problem(folder: Path, key: str) -> str | None:
    """Why ``folder`` (the value of ``key``) cannot be made, tried in its nearest existing parent; None if it can. A
    link on the way to a target that is gone (a scratch disk purged or unmounted behind ``outputs``) is named: the
    parent above it could be written, and making the folder then failed in a traceback."""
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():
            return (
                f"{key}={folder} cannot be made: {existing} is a link to {os.readlink(existing)}, which does not "
                f"exist. Fix: make that folder, or {key}=ANOTHER_FOLDER."
            )
        existing = existing.parent
    if not existing.is_dir():
        return f"{key}={folder} cannot be made: {existing} is a file, not a folder. Fix: {key}=ANOTHER_FOLDER."
    try:
        Path(tempfile.mkdtemp(dir=existing, prefix=".theseus_pl-")).rmdir()
    except OSError as error:
        return (
            f"{key}={folder} cannot be made: {existing} cannot be written ({error.strerror}). Fix: run from a folder "
            f"you can write, or {key}=ANOTHER_FOLDER."
        )
    return None


def made_by_this_command(folder: Path) -> bool:
    """Whether ``folder``, or the sweep folder it is a job of, did not exist when this command started (Hydra made
    it for this job). False where that is not known: a job that a launcher started in a process of its own."""
    folder = folder.absolute()
    return any(folder == made or made in folder.parents for made in _made_here)


class RunFolderCheck(Callback):
    """Refuses a run (or sweep) whose folder cannot be made, before Hydra tries to make it, and notes a folder that
    Hydra is about to make."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _note(Path(config.hydra.run.dir), "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _note(Path(config.hydra.sweep.dir), "hydra.sweep.dir")


def _note(folder: Path, key: str) -> None:
    _refuse(folder_problem(folder, key))
    if not folder.exists():
        _made_here.add(folder.absolute())


def _refuse(problem: str | None) -> None:
    if problem:
        print(f"The run cannot start (nothing was trained or logged):\n- {problem}", file=sys.stderr)
        raise SystemExit(2)
