"""Deploying a folder: a finished run's (its dev set, predecessor, results.json and model card) or any checkpoint's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from transformers import AutoConfig

from theseus_pl.app.config.kinds import data_module_settings
from theseus_pl.app.config.resolvers import register_resolvers
from theseus_pl.app.config.run_folder import RECORD_SUBDIR
from theseus_pl.app.results.deployment_block import write_deployment
from theseus_pl.app.results.envelope import RunRecord, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.registry import Deployer, kind_named
from theseus_pl.app.results.task_model import TaskModelResults
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.tasks import head_label_problem
from theseus_pl.deployment.onnx_deployment import onnx_files
from theseus_pl.deployment.onnx_export import DeploymentError, require_onnxruntime
from theseus_pl.deployment.openvino_export import calibration_in_words, require_openvino
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.stage import (
    check_sequence_classifier,
    check_tokenizer,
    deploy,
    load_sequence_classifier,
    planned_openvino_files,
)
from theseus_pl.deployment.targets import AUTO, ENCODERS, OWN_LENGTHS_IN_WORDS, auto_in_words

log = logging.getLogger(__name__)

CONFIG = ".hydra/config.yaml"  # the run's composed config: its data group names the dev set
# Classes a run folder's config may name by the path of theseus_pl 0.1, before the package took its floors.
RENAMED_TARGETS = {"theseus_pl.data.datamodule.GlueDataModule": "theseus_pl.data.datamodule.TextTaskDataModule"}


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


def check_not_a_runs_successor(folder: Path) -> None:
    """Refuse a run's ``successor/`` deployed as a bare checkpoint: its ONNX files would be replaced while the run's
    ``results.json`` and card still described the old ones (and publish would send that card)."""
    run_dir = folder.resolve().parent
    if folder.resolve().name == "successor" and (run_dir / "results.json").is_file():
        raise DeploymentError(
            f"{folder} is the successor of the run in {run_dir}: deploy the run's folder (python -m theseus_pl.deploy "
            f"{run_dir}), whose record and model card then describe the files written."
        )


def deployable_record(run_dir: Path) -> RunRecord:
    """The record of a finished run (of any kind) whose folder holds all a deployment reads, or why it is not one."""
    results_path, successor_dir = run_dir / "results.json", run_dir / "successor"
    if not successor_dir.is_dir():
        raise DeploymentError(f"{run_dir} has no successor/ folder: it is not a finished theseus_pl run.")
    if not results_path.is_file():
        raise DeploymentError(f"{run_dir} has no results.json: the run did not finish; deploy its successor/ alone.")
    if not (run_dir / CONFIG).is_file():
        raise DeploymentError(
            f"{run_dir} has no {CONFIG}, so its dev set is unknown: deploy its successor/ with --task."
        )
    return read_run(results_path)


def run_deployer(run_dir: Path) -> Deployer:
    """How the finished run in ``run_dir`` deploys, as its kind registered it; a kind that does not deploy to ONNX is
    refused in one line saying how its successor ships instead (its kind's ``shipped_as``)."""
    results = deployable_record(run_dir)
    kind = kind_named(results.kind)
    if kind is None or kind.deployer is None:
        shipped_as = kind.shipped_as if kind is not None else ""
        why = shipped_as.format(successor=run_dir / "successor") or f"a run of kind {results.kind!r}: {ENCODERS}."
        raise DeploymentError(f"{run_dir} is {why}")
    return kind.deployer


def finished_task_model_run(run_dir: Path) -> TaskModelResults:
    """The record of a finished task-model run whose folder holds all a deployment reads, or why it is not one."""
    results = deployable_record(run_dir)
    if results.kind != TaskModelResults.kind:  # the record says its kind: its own deployer deploys it, or none does
        run_deployer(run_dir)
        raise DeploymentError(f"{run_dir} is a run of kind {results.kind!r}; deploy it with python -m "
                              f"theseus_pl.deploy {run_dir}, which deploys each kind its own way.")  # fmt: skip
    return results  # type: ignore[return-value]  # its kind is TaskModelResults'


def deploy_run(run_dir: Path, settings: DeploySettings, glue_dir: str | None = None) -> Deployment:
    """Deploy a finished run's successor on the run's own dev set; its results.json and model card gain the block."""
    results = finished_task_model_run(run_dir)
    successor_dir = run_dir / "successor"
    datamodule = run_dev_data(run_dir, glue_dir)
    predecessor_dir = Path(results.predecessor.dir)
    predecessor = load_sequence_classifier(predecessor_dir) if predecessor_dir.is_dir() else None
    if predecessor is None:
        log.warning("The run's predecessor (%s) is gone: no ratios over it.", predecessor_dir)
    return recorded_deployment(
        run_dir,
        results,
        "deployment",
        lambda: deploy(successor_dir, settings, datamodule, predecessor, predecessor_dir),
        lambda block: block.files,
    )


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


def run_dev_data(run_dir: Path, glue_dir: str | None = None) -> TextTaskDataModule:
    """A classifier run's data module, as its config made it (``glue_dir`` in place of the run's), tokenising with
    its successor's tokenizer, its dev set ready: what a deployment of the run, or a benchmark on it, scores on."""
    register_resolvers()
    cfg = OmegaConf.load(run_dir / CONFIG)
    cfg.data._target_ = RENAMED_TARGETS.get(cfg.data._target_, cfg.data._target_)
    if glue_dir is not None:
        cfg.data.glue_dir = glue_dir
    datamodule: TextTaskDataModule = instantiate(data_module_settings(cfg.data), tokenizer=str(run_dir / "successor"))
    datamodule.setup("validate")
    return datamodule


def task_dev_data(task: str, model_dir: Path, glue_dir: str | None) -> TextTaskDataModule:
    """A GLUE task's data module, tokenising with the checkpoint's tokenizer, its dev set ready: what a checkpoint
    deployed with ``--task`` is scored on. A head that cannot serve the task is refused first (the export would fail
    on its shapes, or score other labels as the task's)."""
    datamodule = TextTaskDataModule(task, str(model_dir), glue_dir=glue_dir)
    if problem := head_label_problem(AutoConfig.from_pretrained(model_dir).id2label, datamodule.task):
        raise DeploymentError(f"{model_dir} does not fit --task {task}: {problem}.")
    datamodule.setup("validate")
    return datamodule


def deploy_model(
    model_dir: Path,
    settings: DeploySettings,
    task: str | None = None,
    glue_dir: str | None = None,
    predecessor_dir: Path | None = None,
) -> Deployment:
    """Deploy any sequence-classification checkpoint; the block is written to ``<model>/onnx/deployment.json``."""
    check_not_a_runs_successor(model_dir)
    datamodule = task_dev_data(task, model_dir, glue_dir) if task is not None else None
    predecessor = load_sequence_classifier(predecessor_dir) if predecessor_dir else None
    block = deploy(model_dir, settings, datamodule, predecessor, predecessor_dir)
    write_deployment(deployment_record(model_dir), block)
    return block


def planned_deployment(
    folder: Path,
    settings: DeploySettings,
    task: str | None = None,
    predecessor_dir: Path | None = None,
    glue_dir: str | None = None,
) -> list[str]:
    """The dry run: the checks a deployment makes before it exports (the folder holds what it reads, the deploy
    extra is installed, the models are sequence classifiers, the dev rows can be read), then what it would export,
    time and write, one line each. A folder or a dev set the real command would refuse is refused here the same
    way."""
    run_folder = is_run_folder(folder)
    if run_folder:
        results = finished_task_model_run(folder)
        successor_dir, predecessor_dir = folder / "successor", Path(results.predecessor.dir)
        predecessor_dir = predecessor_dir if predecessor_dir.is_dir() else None  # gone: no ratios, as deploy_run warns
        checked_on = f"the run's {results.task} dev set"
        records = [folder / "results.json", successor_dir / "README.md"]
    else:
        check_not_a_runs_successor(folder)
        successor_dir = folder
        checked_on = f"the {task} dev set" if task else "a few example sentences (no --task: no dev score)"
        records = [deployment_record(folder)]
    require_onnxruntime()
    check_sequence_classifier(successor_dir, settings.sequence_length)
    check_tokenizer(successor_dir)
    if predecessor_dir is not None:
        check_sequence_classifier(predecessor_dir, settings.sequence_length)
    if settings.openvino:
        require_openvino()
    if run_folder:  # the dev rows it is checked on: a source the deployment cannot read is refused now
        run_dev_data(folder, glue_dir)
    elif task is not None:
        task_dev_data(task, folder, glue_dir)
    has_training_rows = run_folder or task is not None
    openvino = planned_openvino_files(successor_dir, settings, has_training_rows)
    exports = [*onnx_files(successor_dir, settings.quantize).values(), *openvino.values()]
    calibration = calibration_in_words(openvino, settings.calibration_rows)
    length = f"{settings.sequence_length} tokens a row" if settings.sequence_length else "each batch's longest row"
    own_lengths = settings.own_lengths and has_training_rows  # dev rows to time at their own lengths
    own = f"; again at the dev rows' own lengths ({OWN_LENGTHS_IN_WORDS})" if own_lengths else ""
    beside = f", beside the predecessor {predecessor_dir}" if predecessor_dir else ""
    auto = f" ({auto_in_words(settings.max_score_drop)})"
    return [
        f"export {successor_dir}: {', '.join(map(str, exports))} (the folders' onnx/ and openvino/ are replaced)"
        f"{calibration}",
        f"check the exported fp32 logits against PyTorch's on {checked_on}",
        f"time it at batch sizes {', '.join(map(str, settings.batch_sizes))} ({length}), {settings.repeats} calls "
        f"each, on {settings.threads or torch.get_num_threads()} threads{beside}{own}",
        f"ship the target {settings.target}{auto if settings.target == AUTO else ''}",
        f"write the deployment block to {', '.join(map(str, records))}",
    ]
