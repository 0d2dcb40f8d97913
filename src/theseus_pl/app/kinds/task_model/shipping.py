"""Deploying a task model: a finished run's successor on the run's own dev set (its predecessor timed beside it; its
results.json and model card gain the block), or any sequence-classification checkpoint (on a GLUE task's dev set with
``--task``; the block in ``<model>/onnx/deployment.json``), and the dry run of either."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from transformers import AutoConfig

from theseus_pl.app.config.kinds import data_module_settings
from theseus_pl.app.config.resolvers import register_resolvers
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.deployment_block import write_deployment
from theseus_pl.app.ship.deploy_folder import (
    CONFIG,
    check_not_a_runs_successor,
    deployable_record,
    deployment_record,
    is_run_folder,
    recorded_deployment,
    run_deployer,
)
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.tasks import head_label_problem, trained_on_problem
from theseus_pl.deployment.onnx_deployment import onnx_files
from theseus_pl.deployment.onnx_export import DeploymentError, require_onnxruntime
from theseus_pl.deployment.openvino_export import calibration_in_words, require_openvino
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.stage import (
    calibration_count,
    check_sequence_classifier,
    check_tokenizer,
    deploy,
    load_sequence_classifier,
    planned_openvino_files,
)
from theseus_pl.deployment.targets import AUTO, auto_in_words, timing_in_words

log = logging.getLogger(__name__)

# Classes a run folder's config may name by the path of theseus_pl 0.1, before the package took its floors.
RENAMED_TARGETS = {"theseus_pl.data.datamodule.GlueDataModule": "theseus_pl.data.datamodule.TextTaskDataModule"}


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
    predecessor_dir = runs_predecessor_dir(results)
    predecessor = load_sequence_classifier(predecessor_dir) if predecessor_dir is not None else None
    return recorded_deployment(
        run_dir,
        results,
        "deployment",
        lambda: deploy(successor_dir, settings, datamodule, predecessor, predecessor_dir),
        lambda block: block.files,
    )


def runs_predecessor_dir(results: TaskModelResults) -> Path | None:
    """The run's predecessor folder; None, said in a warning, where it is gone (its cache cleaned, the run copied to
    another machine): the deployment then times the successor alone, with no ratios over the predecessor."""
    predecessor_dir = Path(results.predecessor.dir)
    if predecessor_dir.is_dir():
        return predecessor_dir
    log.warning("The run's predecessor (%s) is gone: no ratios over it.", predecessor_dir)
    return None


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
    config = AutoConfig.from_pretrained(model_dir)
    if problem := head_label_problem(config.id2label, datamodule.task) or trained_on_problem(config, datamodule.task):
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
        successor_dir, predecessor_dir = folder / "successor", runs_predecessor_dir(results)
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
    datamodule = None  # the dev rows it is checked on: a source the deployment cannot read is refused now
    if run_folder:
        datamodule = run_dev_data(folder, glue_dir)
    elif task is not None:
        datamodule = task_dev_data(task, folder, glue_dir)
    has_training_rows = datamodule is not None
    openvino = planned_openvino_files(successor_dir, settings, has_training_rows)
    exports = [*onnx_files(successor_dir, settings.quantize).values(), *openvino.values()]
    asked = settings.calibration_rows
    rows = calibration_count(datamodule, asked) if datamodule is not None and "openvino_int8" in openvino else asked
    calibration = calibration_in_words(openvino, rows, asked=asked)
    own_lengths = settings.own_lengths and has_training_rows  # dev rows to time at their own lengths
    timing = timing_in_words(settings, settings.threads or torch.get_num_threads(), predecessor_dir, own_lengths)
    auto = f" ({auto_in_words(settings.max_score_drop, scored=has_training_rows)})"  # dev rows to score on
    return [
        f"export {successor_dir}: {', '.join(map(str, exports))} (an earlier deployment's files in "
        "onnx/ and openvino/ removed first, others kept)"
        f"{calibration}",
        f"check the exported fp32 logits against PyTorch's on {checked_on}",
        timing,
        f"ship the target {settings.target}{auto if settings.target == AUTO else ''}",
        f"write the deployment block to {', '.join(map(str, records))}",
    ]
