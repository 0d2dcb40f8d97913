"""The whole compression behind ``python -m theseus_pl``: predecessor → compress → evaluate → export → report."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedModel

from theseus_pl.data.datamodule import GlueDataModule
from theseus_pl.loggers import build_loggers
from theseus_pl.methods import build_method
from theseus_pl.metrics import TaskMetrics
from theseus_pl.module import ClassifierModule
from theseus_pl.outputs import flat_summary, write_model_card, write_results
from theseus_pl.predecessor import check_fits_task, check_model_reference, load_classifier, prepare_predecessor
from theseus_pl.schedules import build_schedule
from theseus_pl.speed import inference_speedup
from theseus_pl.theseus import TheseusModel

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run every stage and return what ``results.json`` holds."""
    started = time.perf_counter()
    output_dir = Path(cfg.paths.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True)

    # Everything that can be wrong with the config fails here, before any training.
    schedule = build_schedule(**cfg.replacement)
    start_model = cfg.model.predecessor or cfg.model.base
    check_model_reference(start_model, "model.predecessor" if cfg.model.predecessor else "model.base")
    _check_depth(start_model, cfg.theseus.successor_layers)
    datamodule: GlueDataModule = instantiate(cfg.data, tokenizer=start_model)
    task = datamodule.task
    datamodule.source.fingerprint(task, "train")  # a missing data folder or file is reported now
    if cfg.model.predecessor:
        check_fits_task(cfg.model.predecessor, task)
    if cfg.evaluation.single_modules and cfg.method.name != "theseus":
        raise ValueError("evaluation.single_modules scores Theseus modules: it needs method=theseus.")

    evaluation = _evaluation_settings(cfg.trainer)
    predecessor = prepare_predecessor(
        cfg.model.base, cfg.model.predecessor, datamodule, OmegaConf.to_container(cfg.finetune), cfg.seed,
        Path(cfg.paths.cache_dir), evaluation,
    )  # fmt: skip

    method = build_method(
        OmegaConf.to_container(cfg.method), predecessor.directory, task, OmegaConf.to_container(cfg.theseus),
        OmegaConf.to_container(cfg.optimizer), schedule, cfg.replacement.kind, cfg.seed,
    )  # fmt: skip
    callbacks = [instantiate(c) for c in cfg.callbacks.values() if c is not None]
    loggers = build_loggers(output_dir, cfg.logger.wandb, OmegaConf.to_container(cfg, resolve=True))
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=[*callbacks, *method.callbacks], logger=loggers)
    last = output_dir / "checkpoints" / "last.ckpt"
    resume_from = str(last) if cfg.resume and last.is_file() else None
    if resume_from:
        log.info("Resuming from %s", resume_from)
    trainer.fit(method.module, datamodule=datamodule, ckpt_path=resume_from)

    best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
    if best:
        method.module.load_state_dict(torch.load(best, map_location="cpu", weights_only=False)["state_dict"])
    single_modules = (
        single_module_scores(method.module.model, datamodule, evaluation) if cfg.evaluation.single_modules else None
    )
    successor_dir = output_dir / "successor"
    method.successor().save_pretrained(successor_dir)
    datamodule.tokenizer.save_pretrained(successor_dir)
    successor = AutoModelForSequenceClassification.from_pretrained(successor_dir)  # judge what users will ship
    predecessor_model = load_classifier(predecessor.directory, task)

    successor_metrics = evaluate(successor, datamodule, evaluation)
    predecessor_metrics = evaluate(predecessor_model, datamodule, evaluation)
    results = {
        "task": task.name,
        "method": method.name,
        "settings": _settings(cfg),
        "predecessor": {
            "score": predecessor_metrics.pop("score"), "metrics": predecessor_metrics,
            "dir": predecessor.directory, "origin": predecessor.origin,
        },
        "successor": {
            "score": successor_metrics.pop("score"), "metrics": successor_metrics,
            "best_checkpoint": best or None,
        },
        "successor_dir": str(successor_dir),
        "layers": {"predecessor": predecessor_model.config.num_hidden_layers,
                   "successor": successor.config.num_hidden_layers},
        "params": {"predecessor": _count(predecessor_model), "successor": _count(successor)},
        "speedup": _speedup(predecessor_model, successor, datamodule, cfg),
        "schedule": repr(schedule) if method.name.startswith("theseus") else None,
        "switch_step": schedule.switch_step if method.name.startswith("theseus") else None,
        "steps": trainer.global_step,
        "resumed_from": resume_from,
        "data": {"train_size": len(datamodule.splits["train"]),
                 "eval_size": sum(len(datamodule.splits[s]) for s in task.eval_splits)},
        "seed": cfg.seed,
        "single_module_scores": single_modules,
    }  # fmt: skip
    results["retained"] = results["successor"]["score"] / results["predecessor"]["score"]
    results["wall_seconds"] = time.perf_counter() - started
    write_results(output_dir / "results.json", results)
    write_model_card(successor_dir, results)
    _log_summary(loggers, results, trainer.global_step)
    return results


def evaluate(model: PreTrainedModel, datamodule: GlueDataModule, settings: dict[str, Any]) -> dict[str, float]:
    """The task's dev metrics of ``model``: every component and ``score`` (x100)."""
    trainer = pl.Trainer(**settings, logger=False, enable_checkpointing=False)
    trainer.validate(
        ClassifierModule(model, TaskMetrics.for_task(datamodule.task)), datamodule=datamodule, verbose=False
    )
    return {
        name.removeprefix("val/"): float(value)
        for name, value in trainer.callback_metrics.items()
        if name.startswith("val/") and not name.startswith("val/loss")
    }


def single_module_scores(theseus: TheseusModel, datamodule: GlueDataModule, settings: dict[str, Any]) -> list[float]:
    """Table 5: the dev score with only module ``i`` replaced by its successor, for each ``i``."""
    scores = []
    for i in range(theseus.num_modules):
        theseus.set_gate([j == i for j in range(theseus.num_modules)])  # stays set: evaluate calls theseus.model
        scores.append(evaluate(theseus.model, datamodule, settings)["score"])
    theseus.set_gate(None)
    return scores


def _evaluation_settings(trainer_cfg: DictConfig) -> dict[str, Any]:
    """One device with the run's accelerator and precision: for evaluation and predecessor fine-tuning."""
    return {
        "accelerator": trainer_cfg.get("accelerator", "auto"),
        "precision": trainer_cfg.get("precision", "32-true"),
        "devices": 1,
        "enable_model_summary": False,
    }


def _settings(cfg: DictConfig) -> dict[str, Any]:
    """The values a sweep varies, flat, so a report can group runs by them."""
    flat = {f"replacement.{key}": value for key, value in cfg.replacement.items() if key != "kind"}
    flat.update({
        "optimizer.lr": cfg.optimizer.lr,
        "theseus.successor_layers": cfg.theseus.successor_layers,
        "theseus.init": cfg.theseus.init,
        "model": cfg.model.predecessor or cfg.model.base,
        "seed": cfg.seed,
    })  # fmt: skip
    flat.update({f"method.{key}": value for key, value in cfg.method.items() if key != "name"})
    return flat


def _check_depth(model: str, successor_layers: int) -> None:
    layers = AutoConfig.from_pretrained(model).num_hidden_layers
    if not 1 <= successor_layers <= layers:
        raise ValueError(
            f"theseus.successor_layers={successor_layers} must be between 1 and the predecessor's {layers} layers."
        )


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _speedup(
    predecessor: torch.nn.Module, successor: torch.nn.Module, datamodule: GlueDataModule, cfg: DictConfig
) -> float:
    device = "cuda" if torch.cuda.is_available() and cfg.trainer.get("accelerator") != "cpu" else "cpu"
    split = datamodule.splits[datamodule.task.eval_splits[0]]
    rows = split.select(range(min(cfg.benchmark.batch_size, len(split))))
    batch = {k: v.to(device) for k, v in datamodule.collate(list(rows)).items()}
    return inference_speedup(predecessor.to(device), successor.to(device), batch, cfg.benchmark.repeats)


def _log_summary(loggers: list, results: dict[str, Any], step: int) -> None:
    summary = flat_summary(results)
    for logger in loggers:
        try:
            logger.log_metrics(summary, step=step)
            logger.save()
        except Exception as error:  # a logger that fails at the end must not lose the results already written
            log.warning("Could not log the summary to %s: %s", type(logger).__name__, error)
