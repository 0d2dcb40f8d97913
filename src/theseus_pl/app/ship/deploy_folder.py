"""What deploying any kind's finished run shares: telling a run's folder from a checkpoint's, the run's record and the
deployer its kind registered, and writing what a deployment made into the record and the model card (a task model's
own deployment, and a plain checkpoint's, are :mod:`~theseus_pl.app.kinds.task_model.shipping`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from transformers import AutoConfig

from theseus_pl.app.config.run_folder import RECORD_SUBDIR
from theseus_pl.app.results.envelope import RunRecord, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.registry import Deployer, Kind, kind_named
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.core.io import is_sequence_classifier
from theseus_pl.deployment.onnx_export import DeploymentError
from theseus_pl.deployment.targets import ENCODERS

log = logging.getLogger(__name__)

CONFIG = ".hydra/config.yaml"  # the run's composed config: its data group names the dev set
# What a run's folder without its config is told to do, where its kind registers no words of its own (without_config).
PUT_CONFIG_BACK = f"put the run's {CONFIG} back (Hydra wrote it as the run began) and deploy its folder again."


def deployment_record(model_dir: Path) -> Path:
    """Where a checkpoint deployed on its own keeps its ``deployment`` block (a run keeps it in ``results.json``)."""
    return model_dir / "onnx" / "deployment.json"


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is (or was meant to be) a run's, rather than a checkpoint's: what it holds decides."""
    return (folder / "results.json").is_file() or (folder / "successor").is_dir()


RUN_FOLDER_PARTS = ("results.json", "successor", RECORD_SUBDIR, "checkpoints")  # what says a folder is a run's


def not_a_model_problem(folder: Path) -> str | None:
    """Why ``folder``, given where a model is read (deploy, submit), is neither a checkpoint nor a finished run: a
    run killed before it finished, or a sweep's folder of runs; None otherwise. Told apart here, each said "holds no
    config.json: not a Hugging Face checkpoint folder", which names neither the folder's kind nor the fix."""
    if (folder / "config.json").is_file() or is_run_folder(folder):
        return None
    jobs = sorted(job.parent for job in folder.glob(f"*/{RECORD_SUBDIR}"))
    if (folder / "multirun.yaml").is_file() or jobs:
        example = f", e.g. {jobs[0]}" if jobs else ""
        return f"{folder} is a sweep's folder, of many runs: give one run's folder{example}."
    if any((folder / part).exists() for part in RUN_FOLDER_PARTS):
        return (f"{folder} is the folder of a run that has not finished (no results.json and successor/): rerun its "
                "command, which resumes it, then give the folder again.")  # fmt: skip
    return None


def check_not_a_runs_successor(folder: Path, options: str = "", deploys_alone: bool = True) -> None:
    """Refuse a run's ``successor/`` deployed as a bare checkpoint: its ONNX (or GGUF) files would be replaced while
    the run's ``results.json`` and card still described the old ones (and publish would send that card). The command
    it gives instead carries ``options``, the deployment's own (``--gguf f16``): without them it is refused again.

    A run's folder without its config (:data:`CONFIG`) does not deploy: its dev set is unknown, and its refusal says
    what to do in its kind's words (a task model's: deploy its ``successor/`` with ``--task``). Where
    ``deploys_alone`` (a checkpoint's deployment, which ``--task`` gives dev rows), that successor deploys as a
    checkpoint, its block in ``onnx/deployment.json``, and a warning says
    that the run's ``results.json`` and card are left as they are; sent back to the run's folder, it was refused
    there again."""
    run_dir = folder.resolve().parent
    if folder.resolve().name != "successor" or not (run_dir / "results.json").is_file():
        return
    if deploys_alone and not (run_dir / CONFIG).is_file():
        if not successor_deploys_alone(run_dir):  # a sentence-embedding successor: told what does, in its kind's words
            deployable_record(run_dir)
        log.warning(
            "%s is the successor of the run in %s, which has no %s: it deploys as a checkpoint, its block written "
            "to %s; the run's results.json and model card are left as they are.",
            folder, run_dir, CONFIG, deployment_record(folder),
        )  # fmt: skip
        return
    raise DeploymentError(
        f"{folder} is the successor of the run in {run_dir}: deploy the run's folder (python -m theseus_pl.deploy "
        f"{run_dir}{options}), whose record and model card then describe the files written."
    )


def deployable_record(run_dir: Path) -> RunRecord:
    """The record of a finished run (of any kind) whose folder holds all a deployment reads, or why it is not one:
    a folder without its config is told what to do in its kind's words (``without_config``), as what works differs
    (a task model's successor deploys alone with ``--task``; a sentence-embedding one, no classifier, does not)."""
    results = _finished_record(run_dir)
    _check_config(run_dir, kind_named(results.kind))
    return results


def successor_deploys_alone(run_dir: Path) -> bool:
    """Whether the run's ``successor/`` deploys as a checkpoint folder, which ``--task`` gives dev rows: a sequence
    classifier (a task model's) does; a sentence-embedding or decoder LM's successor is none."""
    config = run_dir / "successor" / "config.json"
    return config.is_file() and is_sequence_classifier(AutoConfig.from_pretrained(config.parent))


def _check_config(run_dir: Path, kind: Kind[Any] | None) -> None:
    """Refuse a run's folder without its config, saying what to do in its kind's words (or :data:`PUT_CONFIG_BACK`)."""
    if not (run_dir / CONFIG).is_file():
        instead = (kind.without_config if kind is not None else "") or PUT_CONFIG_BACK
        raise DeploymentError(f"{run_dir} has no {CONFIG}, so its dev set is unknown: {instead}")


def _finished_record(run_dir: Path) -> RunRecord:
    """The record of the finished run in ``run_dir``, whose config may be missing, or why it is not a finished run."""
    results_path, successor_dir = run_dir / "results.json", run_dir / "successor"
    if not successor_dir.is_dir():
        raise DeploymentError(f"{run_dir} has no successor/ folder: it is not a finished theseus_pl run.")
    if not results_path.is_file():
        raise DeploymentError(f"{run_dir} has no results.json: the run did not finish; deploy its successor/ alone.")
    return read_run(results_path)


def run_deployer(run_dir: Path) -> Deployer:
    """How the finished run in ``run_dir`` deploys, as its kind registered it; a kind that does not deploy to ONNX is
    refused in one line saying how its successor ships instead (its kind's ``shipped_as``), before its config is
    looked for: a decoder LM's folder without one was told to deploy its successor with ``--task``, a classifier's
    fix for a model that is none."""
    results = _finished_record(run_dir)
    kind = kind_named(results.kind)
    if kind is None or kind.deployer is None:
        shipped_as = kind.shipped_as if kind is not None else ""
        why = shipped_as.format(successor=run_dir / "successor") or f"a run of kind {results.kind!r}: {ENCODERS}."
        raise DeploymentError(f"{run_dir} is {why}")
    _check_config(run_dir, kind)
    return kind.deployer


Shipped = TypeVar("Shipped")


def recorded_deployment(
    run_dir: Path,
    results: RunRecord,
    step: str,
    deploying: Callable[[], Shipped],
    files: Callable[[Shipped], Iterable[str]],
) -> Shipped:
    """Run ``deploying`` on a finished run and write what it returns into the record's field ``step``
    (``deployment``, or a decoder LM's ``gguf``) and the model card; ``files``: the files (in ``successor/``) a value
    of that field names.

    A deployment empties the folders it writes before exporting, so one that fails part-way leaves an earlier
    deployment's record describing files that are gone (and ``publish`` sent that card): where any is gone, that
    value is dropped and the failure named in ``failed_steps[step]``. A success clears such a failure, or the
    run's own."""
    successor_dir = run_dir / "successor"
    try:
        shipped = deploying()
    except BaseException as error:  # Ctrl-C part-way empties the folders as surely
        earlier = getattr(results, step)
        if earlier is not None and not all((successor_dir / file).is_file() for file in files(earlier)):
            setattr(results, step, None)
            results.failed_steps[step] = f"{type(error).__name__}: {error}"
            write_results(run_dir / "results.json", results)
            write_model_card(successor_dir, results)
        raise
    setattr(results, step, shipped)
    results.failed_steps.pop(step, None)
    write_results(run_dir / "results.json", results)
    write_model_card(successor_dir, results)
    return shipped
