"""Deploying a folder: a finished run's (its dev set, predecessor, results.json and model card) or any checkpoint's."""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from theseus_pl.app.config.resolvers import register_resolvers
from theseus_pl.app.results.envelope import write_results
from theseus_pl.app.results.language_model import LanguageModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.task_model import RunResults, write_deployment
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.deployment.onnx_export import DeploymentError
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.stage import deploy, load_sequence_classifier

log = logging.getLogger(__name__)

# Classes a run folder's config may name by the path of theseus_pl 0.1, before the package took its floors.
RENAMED_TARGETS = {"theseus_pl.data.datamodule.GlueDataModule": "theseus_pl.data.datamodule.TextTaskDataModule"}


def deploy_run(run_dir: Path, settings: DeploySettings, glue_dir: str | None = None) -> Deployment:
    """Deploy a finished run's successor on the run's own dev set; its results.json and model card gain the block."""
    results_path, successor_dir = run_dir / "results.json", run_dir / "successor"
    if not successor_dir.is_dir():
        raise DeploymentError(f"{run_dir} has no successor/ folder: it is not a finished theseus_pl run.")
    if not results_path.is_file():
        raise DeploymentError(f"{run_dir} has no results.json: the run did not finish; deploy its successor/ alone.")
    config_path = run_dir / ".hydra" / "config.yaml"
    if not config_path.is_file():
        raise DeploymentError(
            f"{run_dir} has no .hydra/config.yaml, so its dev set is unknown: deploy its successor/ with --task."
        )
    results = read_run(results_path)
    if isinstance(results, LanguageModelResults):
        raise DeploymentError(
            f"{run_dir} is a decoder-LM run: its successor is the causal-LM folder {successor_dir} (transformers "
            "safetensors, with its model card); ONNX and int8 deployment are built for encoder runs, and no GGUF "
            "export exists yet."
        )
    assert isinstance(results, RunResults)
    register_resolvers()
    cfg = OmegaConf.load(config_path)
    cfg.data._target_ = RENAMED_TARGETS.get(cfg.data._target_, cfg.data._target_)
    if glue_dir is not None:
        cfg.data.glue_dir = glue_dir
    datamodule: TextTaskDataModule = instantiate(cfg.data, tokenizer=str(successor_dir))
    datamodule.setup("validate")
    predecessor_dir = Path(results.predecessor.dir)
    predecessor = load_sequence_classifier(predecessor_dir) if predecessor_dir.is_dir() else None
    if predecessor is None:
        log.warning("The run's predecessor (%s) is gone: no ratios over it.", predecessor_dir)
    deployment = deploy(successor_dir, settings, datamodule, predecessor, predecessor_dir)
    results.deployment = deployment
    write_results(results_path, results)
    write_model_card(successor_dir, results)
    return deployment


def deploy_model(
    model_dir: Path,
    settings: DeploySettings,
    task: str | None = None,
    glue_dir: str | None = None,
    predecessor_dir: Path | None = None,
) -> Deployment:
    """Deploy any sequence-classification checkpoint; the block is written to ``<model>/onnx/deployment.json``."""
    datamodule = None
    if task is not None:
        datamodule = TextTaskDataModule(task, str(model_dir), glue_dir=glue_dir)
        datamodule.setup("validate")
    predecessor = load_sequence_classifier(predecessor_dir) if predecessor_dir else None
    block = deploy(model_dir, settings, datamodule, predecessor, predecessor_dir)
    write_deployment(model_dir / "onnx" / "deployment.json", block)
    return block
