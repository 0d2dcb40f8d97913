"""The whole compression behind ``python -m theseus_pl``: predecessor → compress → evaluate → export → report."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.checks.run import checked_datamodule
from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.methods.method import Method, MethodInputs
from theseus_pl.app.predecessors.classifier import Predecessor, load_classifier, looks_like_path, prepare_predecessor
from theseus_pl.app.results.envelope import Hardware, write_results
from theseus_pl.app.results.reading import read_results
from theseus_pl.app.results.task_model import (
    DataFacts,
    LayerCounts,
    ModelShape,
    ParamCounts,
    PredecessorResult,
    RunResults,
    SuccessorResult,
)
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.app.tracking.loggers import build_loggers, log_summary_row
from theseus_pl.app.tracking.run_identity import run_identity
from theseus_pl.app.tracking.wandb_run import finish, publish, run_link, wandb_run
from theseus_pl.core.families import find_layer_stack, shape_of
from theseus_pl.core.io import is_pickled, load_successor, save_successor
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.timing import inference_speedup
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.deployment.record import DeploySettings, wanted
from theseus_pl.deployment.stage import deploy
from theseus_pl.lightning.callbacks import StepSeed
from theseus_pl.lightning.evaluation import evaluate
from theseus_pl.lightning.precision import AUTO, resolve_precision, this_cpu, uses_gpu

log = logging.getLogger(__name__)

R = TypeVar("R")  # a run's results record: an encoder run's or a decoder-LM run's


def run(cfg: DictConfig) -> RunResults | None:
    """Run every stage and return the run's results record (None on DDP ranks other than 0, which write nothing).

    The job's W&B run ends with it: finished, or failed with the error in its summary, so the next job of a
    multirun (same process under the basic and joblib launchers) starts a fresh run.
    """
    started = time.perf_counter()
    output_dir = Path(cfg.paths.output_dir)
    # A finished run is returned as it is (its settings permitting); anything wrong with a run to be trained fails
    # here, in one message, before any training and before W&B starts.
    settings = checked_settings(cfg)  # each group's settings object, built and checked once for the whole run
    finished = None if settings.problems else finished_run(output_dir, cfg.resume, read_results)
    if finished is not None:
        return finished
    datamodule = checked_datamodule(cfg, settings)
    output_dir.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    pl.seed_everything(cfg.seed, workers=True)
    schedule = settings.schedule
    task = datamodule.task

    hardware = run_hardware(cfg.trainer)
    log.info("Training in %s: %s.", hardware.precision, hardware.precision_reason)
    evaluation = evaluation_settings(cfg.trainer, hardware.precision)
    # Resolved: sweeps set values by interpolation (rates_equivalent_lr's lr = lr'/p, the protocol's grid points).
    finetune, optimizer = (OmegaConf.to_container(cfg[group], resolve=True) for group in ("finetune", "optimizer"))
    predecessor = prepare_predecessor(
        cfg.model.base, cfg.model.predecessor, datamodule, finetune, cfg.seed, Path(cfg.paths.cache_dir), evaluation
    )
    method = settings.method.build(MethodInputs(
        predecessor.directory, task, settings.theseus, optimizer, schedule, cfg.replacement.kind, cfg.seed,
        lambda: calibration_batches(datamodule),
    ))  # fmt: skip
    identity = run_identity(cfg, task.name, method.name)
    resume_from, resume_step = resume_point(output_dir, cfg.resume)
    logged_config = {**OmegaConf.to_container(cfg, resolve=True), "hardware": asdict(hardware)}  # type: ignore[dict-item]
    loggers = build_loggers(output_dir, cfg.logger.wandb, logged_config, identity, resume_step)
    experiment = wandb_run(loggers)  # the W&B run, as Lightning calls it; None without W&B
    try:
        trainer, resumed_from = train(cfg, method, datamodule, loggers, resume_from, hardware.precision)
        if not trainer.is_global_zero:
            log.info("Rank %d is done; rank 0 evaluates, exports and writes the results.", trainer.global_rank)
            results = None
        else:
            results = _report(
                cfg, trainer, resumed_from, method, predecessor, datamodule, evaluation, settings.deploy, loggers,
                experiment, started, hardware,
            )  # fmt: skip
    except BaseException as error:
        finish(experiment, error)
        raise
    finish(experiment)
    return results


def resume_point(output_dir: Path, resume: bool | str) -> tuple[Path | None, int | None]:
    """``checkpoints/last.ckpt`` of an interrupted run and the step it was saved at (memory-mapped: the weights are
    not read), where ``resume`` is true; else nothing to resume from."""
    last = output_dir / "checkpoints" / "last.ckpt"
    if resume is not True or not last.is_file():
        return None, None
    return last, torch.load(last, map_location="cpu", weights_only=False, mmap=True)["global_step"]


def finished_run(output_dir: Path, resume: bool | str, read: Callable[[Path], R]) -> R | None:
    """A finished run's results (its ``results.json`` as ``read`` reads it), left untouched; None when this folder is
    to be trained (``resume`` permitting).

    Only ``resume=force`` redoes a finished run in place: it removes the old results and checkpoints first, so
    nothing of the old run is resumed or mistaken for the new one's.
    """
    results = output_dir / "results.json"
    if not results.is_file():
        return None
    if resume == "force":
        log.warning("resume=force: redoing the finished run in %s; its results and checkpoints go.", output_dir)
        results.unlink()
        shutil.rmtree(output_dir / "checkpoints", ignore_errors=True)
        return None
    log.warning(
        "%s holds a finished run (results.json); nothing was changed. To redo it, rerun with resume=force (in place) "
        "or into another folder (hydra.run.dir=DIR).", output_dir,
    )  # fmt: skip
    return read(results)


def train(
    cfg: DictConfig,
    method: Method,
    datamodule: TextTaskDataModule,
    loggers: list[Logger],
    resume_from: Path | None,
    precision: str,
) -> tuple[pl.Trainer, str | None]:
    """The fitted Trainer, and the checkpoint it resumed from (None for a fresh run)."""
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    callbacks += [*method.callbacks, StepSeed(cfg.seed)]
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers, precision=precision)
    resumed_from = str(resume_from) if resume_from else None
    if resumed_from:
        log.info("Resuming from %s", resumed_from)
    trainer.fit(method.module, datamodule=datamodule, ckpt_path=resumed_from)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Training is over: rank 0 evaluates and exports alone, and a later Trainer must not wait for ranks that
        # have finished (its data preparation barrier would make a new group of every rank and hang).
        torch.distributed.destroy_process_group()
    return trainer, resumed_from


def _report(
    cfg: DictConfig,
    trainer: pl.Trainer,
    resumed_from: str | None,
    method: Method,
    predecessor: Predecessor,
    datamodule: TextTaskDataModule,
    evaluation: dict[str, Any],
    deploy_settings: DeploySettings | None,
    loggers: list[Logger],
    experiment: Any | None,
    started: float,
    hardware: Hardware,
) -> RunResults:
    """Evaluate, export and write ``results.json`` as soon as the scores are known; then the optional steps.

    An optional step that fails (speed-up, model card, logging the summary) is named under ``failed_steps`` in
    ``results.json`` with its error, and the scores stay on disk.
    """
    output_dir = Path(cfg.paths.output_dir)
    task = datamodule.task
    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    best_step = None
    if best:
        checkpoint = torch.load(best, map_location="cpu", weights_only=False)
        method.module.load_state_dict(checkpoint["state_dict"])
        best_step = checkpoint["global_step"]
    single_modules = (
        single_module_scores(method.module.model, datamodule, evaluation) if cfg.evaluation.single_modules else None
    )
    successor_dir = output_dir / "successor"
    save_successor(method.successor(), successor_dir, datamodule.tokenizer)
    successor = load_successor(successor_dir)  # judge what users will ship
    predecessor_model = load_classifier(predecessor.directory, task)

    successor_metrics = evaluate(successor, datamodule, evaluation)
    predecessor_metrics = dict(predecessor.dev_metrics or evaluate(predecessor_model, datamodule, evaluation))
    schedule = method.schedule  # None for the baselines: they train by no replacement schedule
    results = RunResults(
        task=task.name,
        method=method.name,
        settings=_settings(cfg),
        predecessor=PredecessorResult(
            score=predecessor_metrics.pop("score"), metrics=predecessor_metrics, dir=predecessor.directory,
            origin=predecessor.origin, shape=ModelShape(**shape_of(predecessor_model.config)),
        ),
        successor=SuccessorResult(
            score=successor_metrics.pop("score"), metrics=successor_metrics, best_checkpoint=best or None,
            best_step=best_step,
            shape=ModelShape(**shape_of(successor.config)),
            format="pickled module" if is_pickled(successor_dir) else "transformers",
        ),
        successor_dir=str(successor_dir),
        layers=LayerCounts(predecessor_model.config.num_hidden_layers, successor.config.num_hidden_layers),
        params=ParamCounts(
            predecessor=_count(predecessor_model), successor=_count(successor),
            predecessor_layers=_count(find_layer_stack(predecessor_model).layers),
            successor_layers=_count(find_layer_stack(successor).layers),
        ),
        schedule=schedule.describe() if schedule else None,
        switch_step=schedule.switch_step if schedule else None,
        successor_finetuning_steps=max(0, trainer.global_step - schedule.switch_step) if schedule else None,
        steps=trainer.global_step,
        resumed_from=resumed_from,
        base_model=_hub_id(cfg.model),
        data=_data_facts(cfg, datamodule),
        seed=cfg.seed,
        hardware=hardware,
        single_module_scores=single_modules,
        wandb=run_link(experiment),
    )  # fmt: skip
    results_path = write_results(output_dir / "results.json", results)  # the scores are safe from here on

    def measure_speedup() -> None:
        results.speedup = _speedup(predecessor_model, successor, datamodule, cfg)

    if cfg.benchmark.repeats:
        _optional(results, "speedup", measure_speedup)
    if deploy_settings is not None and wanted(cfg.deploy):

        def deployment() -> None:
            directory = Path(predecessor.directory)
            results.deployment = deploy(successor_dir, deploy_settings, datamodule, predecessor_model, directory)

        _optional(results, "deployment", deployment)
    _optional(results, "model_card", lambda: write_model_card(successor_dir, results))
    results.wall_seconds = time.perf_counter() - started
    _optional(results, "csv_summary", lambda: log_summary_row(loggers, results, trainer.global_step))
    write_results(results_path, results)
    if experiment is not None:
        files = {"results.json": results_path, "config.yaml": output_dir / ".hydra" / "config.yaml",
                 "model_card.md": successor_dir / "README.md"}  # fmt: skip
        log_model = cfg.logger.wandb.get("log_model", False)
        if _optional(results, "wandb", lambda: publish(experiment, results, files, successor_dir, log_model)):
            write_results(results_path, results)
    if not cfg.checkpoint.keep:
        shutil.rmtree(output_dir / "checkpoints", ignore_errors=True)
    return results


def _optional(results: RunResults, step: str, action: Callable[[], object]) -> bool:
    """Run a step the scores do not depend on; a failure is recorded and logged, never raised. True if it failed."""
    try:
        action()
    except Exception as error:
        results.failed_steps[step] = f"{type(error).__name__}: {error}"
        log.warning("Step %r failed (%s: %s); the scores are in results.json.", step, type(error).__name__, error)
        return True
    return False


def single_module_scores(
    theseus: TheseusModel, datamodule: TextTaskDataModule, settings: dict[str, Any]
) -> list[float]:
    """Table 5: the dev score with only module ``i`` replaced by its successor, for each ``i``."""
    scores = []
    for i in range(theseus.num_modules):
        theseus.set_gate([j == i for j in range(theseus.num_modules)])  # stays set: evaluate calls theseus.model
        scores.append(evaluate(theseus.model, datamodule, settings)["score"])
    theseus.set_gate(None)
    return scores


def run_hardware(trainer_cfg: DictConfig) -> Hardware:
    """The machine the run trains on and the precision ``trainer.precision`` means on it (``auto``: see
    :mod:`theseus_pl.lightning.precision`)."""
    requested, accelerator = str(trainer_cfg.get("precision", AUTO)), str(trainer_cfg.get("accelerator", "auto"))
    cpu, choice = this_cpu(), resolve_precision(requested, accelerator)
    return Hardware(
        precision=choice.precision, precision_requested=requested, precision_reason=choice.reason,
        accelerator="gpu" if uses_gpu(accelerator) else "cpu", cpu=cpu.model, cpu_flags=cpu.relevant_flags,
    )  # fmt: skip


def evaluation_settings(trainer_cfg: DictConfig, precision: str) -> dict[str, Any]:
    """One device with the run's accelerator and precision: for evaluation and predecessor fine-tuning."""
    return {
        "accelerator": trainer_cfg.get("accelerator", "auto"),
        "precision": precision,
        "devices": 1,
        "enable_model_summary": False,
    }


def _settings(cfg: DictConfig) -> dict[str, Any]:
    """The values a sweep varies, flat, so a report can group runs by them."""
    flat = {f"replacement.{key}": value for key, value in cfg.replacement.items() if key != "kind"}
    flat.update({
        "optimizer.lr": cfg.optimizer.lr,
        "trainer.max_steps": cfg.trainer.max_steps,
        "theseus.successor_layers": cfg.theseus.successor_layers,
        "theseus.init": cfg.theseus.init,
        "theseus.successor._target_": cfg.theseus.successor._target_,
        "theseus.successor.intermediate_size": cfg.theseus.successor.intermediate_size,
        "theseus.successor.importance": cfg.theseus.successor.get("importance"),
        "theseus.successor.hidden_size": cfg.theseus.successor.get("hidden_size"),
        "theseus.finetune_shared": cfg.theseus.finetune_shared,
        "theseus.lr_schedule": cfg.theseus.lr_schedule,
        "ablation": cfg.get("ablation"),
        "model": cfg.model.predecessor or cfg.model.base,
        "seed": cfg.seed,
    })  # fmt: skip
    flat.update({f"method.{key}": value for key, value in cfg.method.items() if key not in ("name", "_target_")})
    return flat


def _hub_id(model: DictConfig) -> str | None:
    """The hub id of the model the user named (the predecessor if given, else the base): for the model card."""
    named = model.predecessor or model.base
    return model.get("hub_id") or (None if looks_like_path(named) else named)


def _data_facts(cfg: DictConfig, datamodule: TextTaskDataModule) -> DataFacts:
    """What the model card says about the data: sizes, labels, and the hub dataset (GLUE tasks only)."""
    task = datamodule.task
    return DataFacts(
        train_size=len(datamodule.splits["train"]),
        eval_size=sum(len(datamodule.splits[split]) for split in task.eval_splits),
        eval_splits=list(task.eval_splits),
        text_columns=list(task.text_columns),
        labels=list(task.label_names),
        source=datamodule.source.describe(task),
        dataset=cfg.data.hub_dataset if task.hub_config and not cfg.data.files else None,
        dataset_config=task.hub_config,
    )


CALIBRATION_ROWS = 128  # the training rows successors are measured on: activation importance, hidden-width PCA


def calibration_batches(datamodule: TextTaskDataModule) -> list[dict[str, torch.Tensor]]:
    """The first training rows, in batches as training forms them: the same rows on every run of a seed."""
    if "train" not in datamodule.splits:  # a cached predecessor: nothing has read the training split yet
        datamodule.setup("fit")
    split = datamodule.splits["train"]
    rows = list(split.select(range(min(CALIBRATION_ROWS, len(split)))))
    size = datamodule.batch_size
    return [dict(datamodule.collate(rows[start : start + size])) for start in range(0, len(rows), size)]


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _speedup(
    predecessor: torch.nn.Module, successor: torch.nn.Module, datamodule: TextTaskDataModule, cfg: DictConfig
) -> float:
    device = "cuda" if uses_gpu(str(cfg.trainer.get("accelerator", "auto"))) else "cpu"
    split = datamodule.splits[datamodule.task.eval_splits[0]]
    rows = split.select(range(min(cfg.benchmark.batch_size, len(split))))
    batch = {k: v.to(device) for k, v in datamodule.collate(list(rows)).items()}
    return inference_speedup(predecessor.to(device), successor.to(device), batch, cfg.benchmark.repeats)
