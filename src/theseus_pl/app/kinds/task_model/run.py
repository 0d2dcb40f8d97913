"""A task-model run: a fine-tuned classifier or regressor (an encoder) compressed on its task.

What this kind supplies to the run's stages (:class:`~theseus_pl.app.run.kind.RunKind`): the data module of the
task, read and checked before anything starts; the predecessor, fine-tuned on the task or found in the cache; the
best checkpoint on the dev score, scored as exported; the inference speed-up, ONNX deployment and the model card.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from omegaconf import DictConfig
from transformers import AutoConfig

from theseus_pl.app.kinds.task_model.checks import checked_datamodule
from theseus_pl.app.kinds.task_model.config import TaskModelConfig
from theseus_pl.app.kinds.task_model.record import (
    DataFacts,
    LayerCounts,
    ModelShape,
    ParamCounts,
    PredecessorResult,
    SuccessorResult,
    TaskModelResults,
)
from theseus_pl.app.kinds.task_model.tracking import publish
from theseus_pl.app.methods.kind_models import TaskModels
from theseus_pl.app.methods.method import CompressionMethod, Method, MethodInputs
from theseus_pl.app.methods.schedules import successor_finetuning_steps
from theseus_pl.app.predecessors.classifier import (
    Predecessor,
    cached_predecessor_folder,
    fine_tuning_module,
    load_classifier,
    prepare_predecessor,
)
from theseus_pl.app.predecessors.resumable_training import entry_state
from theseus_pl.app.results.envelope import Hardware, WandbLink, budget_settings
from theseus_pl.app.run.kind import PredecessorTraining, RunKind
from theseus_pl.app.run.stages import each_process, empty_successor_folder, hub_id, load_best_checkpoint, rows_per_step
from theseus_pl.app.ship.model_card import write_model_card
from theseus_pl.core.families import find_layer_stack, shape_of
from theseus_pl.core.io import is_pickled, load_successor, save_successor
from theseus_pl.core.precision import uses_gpu
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.timing import inference_speedup, was_busy
from theseus_pl.data.cache_entry import is_cached
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.deployment.record import Deployment, wanted
from theseus_pl.deployment.stage import deploy
from theseus_pl.lightning.evaluation import evaluate

log = logging.getLogger(__name__)


class TaskModelRun(RunKind[TaskModelResults]):
    """An encoder compressed on a task (``data.task`` or your files)."""

    config: TaskModelConfig  # its settings, typed (the registration's config)
    description = "task model (an encoder compressed on a task)"

    datamodule: TextTaskDataModule
    predecessor: Predecessor

    def check(self) -> None:
        self.datamodule = checked_datamodule(self.cfg, self.settings)  # refuses with every problem, settings' too
        self.name = self.datamodule.task.name

    def prepare_predecessor(self, evaluation: dict[str, Any]) -> None:
        config = self.config
        self.predecessor = prepare_predecessor(
            config.model.base, config.model.predecessor, self.datamodule, self.finetune_settings(), config.seed,
            self.cache_dir, evaluation, config.checkpoint.every_n_steps,
            config.callbacks.get("resume_checkpoint") is not None,
        )  # fmt: skip

    def stand_in_predecessor(self, folder: Path, evaluation: dict[str, Any]) -> PredecessorTraining | None:
        config, datamodule = self.config, self.datamodule
        cached = self._cached_predecessor(evaluation["precision"])
        if config.model.predecessor or is_cached(cached):
            self.prepare_predecessor(evaluation)  # given, or from the cache: nothing is trained
            return None
        model = load_classifier(config.model.base, datamodule.task, new_head=True)
        model.save_pretrained(folder)
        self.predecessor = Predecessor(str(folder), "stand-in")
        done = self.interrupted_training(cached) or 0  # an interrupted fine-tuning has only the rest to run
        return PredecessorTraining(
            fine_tuning_module(model, datamodule.task, self.finetune_settings()),
            self._fine_tuning_batches() - done,
            "the predecessor's fine-tuning",
            validates=True,
        )

    def plan(self, steps: int | None, world_size: int, precision: str) -> list[str]:
        config, datamodule = self.config, self.datamodule
        task = datamodule.task
        train = len(datamodule.split("train"))  # the splits the check tokenised, from the cache
        scored = ", ".join(f"{len(datamodule.split(split)):,} {split}" for split in task.eval_splits)
        named = config.model.predecessor or config.model.base
        made = "given, fine-tuned already" if config.model.predecessor else self._predecessor_state(precision)
        seen = (steps or 0) * rows_per_step(self.cfg, world_size)
        rows = f"{seen:,} rows, {seen / train:.1f} epochs" if steps else ""
        return [
            f"data: {task.name}, {datamodule.source.describe(task)}: {train:,} training rows; scored on {scored} rows",
            f"predecessor: {named} ({made}), {AutoConfig.from_pretrained(named).num_hidden_layers} layers",
            f"training: {f'{steps:,}' if steps else 'up to trainer.max_epochs'} optimizer steps of "
            f"{config.data.batch_size} rows" + each_process(world_size) + (f" ({rows})" if rows else ""),
        ]

    def _predecessor_state(self, precision: str) -> str:
        """Where the predecessor fine-tuned from the base would come from, in words for the plan."""
        cached = self._cached_predecessor(precision)
        return entry_state(
            cached,
            self._fine_tuning_batches(),
            self.interrupted_training(cached),
            "fine-tuned on the task",
            "fine-tuning it on the task",
            "fine-tuning on the task",
        )

    def _cached_predecessor(self, precision: str) -> Path:
        """The folder the predecessor fine-tuned from the base is cached in, made or not."""
        config = self.config
        return cached_predecessor_folder(config.model.base, self.datamodule, self.finetune_settings(), config.seed,
                                         self.cache_dir, precision)  # fmt: skip

    def _fine_tuning_batches(self) -> int:
        return self.config.finetune.epochs * len(self.datamodule.train_dataloader())

    def data_fingerprint(self) -> tuple[str, str] | None:
        # own files (data.files) may be edited under the same settings; GLUE's and the hub's are named by them
        datamodule = self.datamodule
        return ",".join(datamodule.data_fingerprints), datamodule.source.describe(datamodule.task)

    def method_inputs(self, optimizer: dict[str, Any]) -> MethodInputs:
        datamodule = self.datamodule
        return self.inputs_from(self.predecessor.directory, TaskModels(datamodule.task), optimizer,
                                lambda: calibration_batches(datamodule))  # fmt: skip

    def record(
        self,
        trainer: pl.Trainer | None,
        method: Method,
        resumed_from: str | None,
        evaluation: dict[str, Any],
        hardware: Hardware,
        link: WandbLink | None,
    ) -> TaskModelResults:
        """The best checkpoint on the dev score (where callbacks chose one) exported and scored as users will load
        it, beside the predecessor."""
        config, datamodule, predecessor = self.config, self.datamodule, self.predecessor
        task = datamodule.task
        assert trainer is not None and method.module is not None  # every task-model method trains
        assert self.settings.method is not None  # a run whose method settings have problems is refused
        best, best_step = load_best_checkpoint(trainer, method)
        single_modules = (
            single_module_scores(method.module.model, datamodule, evaluation)
            if config.evaluation.single_modules
            else None
        )
        successor_dir = empty_successor_folder(self.output_dir)
        save_successor(method.successor(), successor_dir, datamodule.tokenizer)
        self.successor = successor = load_successor(successor_dir)  # judge what users will ship
        self.predecessor_model = predecessor_model = load_classifier(predecessor.directory, task)

        successor_metrics = evaluate(successor, datamodule, evaluation)
        predecessor_metrics = dict(predecessor.dev_metrics or evaluate(predecessor_model, datamodule, evaluation))
        schedule = method.schedule  # None for the baselines: they train by no replacement schedule
        return TaskModelResults(
            task=task.name,
            method=method.name,
            settings=_settings(self.cfg, self.settings.method, TaskModels(task)),
            predecessor=PredecessorResult(
                score=predecessor_metrics.pop("score"), metrics=predecessor_metrics, dir=predecessor.directory,
                origin=predecessor.origin, shape=ModelShape(**shape_of(predecessor_model.config)),
            ),
            successor=SuccessorResult(
                score=successor_metrics.pop("score"), metrics=successor_metrics,
                best_checkpoint=best if config.checkpoint.keep else None,  # else deleted as the run finishes
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
            successor_finetuning_steps=successor_finetuning_steps(schedule, trainer.global_step),
            steps=trainer.global_step,
            resumed_from=resumed_from,
            base_model=hub_id(self.cfg.model),
            data=_data_facts(config, datamodule),
            seed=config.seed,
            hardware=hardware,
            single_module_scores=single_modules,
            wandb=link,
        )  # fmt: skip

    def optional_steps(self, results: TaskModelResults) -> list[tuple[str, Callable[[], object]]]:
        config, successor_dir = self.config, Path(results.successor_dir)
        steps: list[tuple[str, Callable[[], object]]] = []

        def measure_speedup() -> None:
            speedup, other_cores = _speedup(self.predecessor_model, self.successor, self.datamodule, config)
            if was_busy(other_cores):  # timed beside other work: not the model's
                log.warning("The speed-up was timed while other processes used %.2f cores, twice: not recorded.",
                            other_cores)  # fmt: skip
                results.speedup, results.speedup_busy_cores = None, other_cores
            else:
                results.speedup = speedup

        def deployment() -> None:
            directory = Path(self.predecessor.directory)
            results.deployment = deploy(
                successor_dir, self.settings.deploy, self.datamodule, self.predecessor_model, directory
            )

        if config.benchmark.repeats:
            steps.append(("speedup", measure_speedup))
        if self.settings.deploy is not None and wanted(self.cfg.deploy):
            steps.append(("deployment", deployment))
        steps.append(("model_card", lambda: write_model_card(successor_dir, results)))
        return steps

    def untrained_deployment(self, method: Method, successor_dir: Path) -> Deployment:
        assert self.settings.deploy is not None  # a search's trials deploy: its checks refuse deploy.onnx=false
        save_successor(method.successor(), successor_dir, self.datamodule.tokenizer)
        return deploy(successor_dir, self.settings.deploy, self.datamodule)

    def publish(self, experiment: Any, results: TaskModelResults, results_path: Path) -> None:
        successor_dir = Path(results.successor_dir)
        files = {"results.json": results_path, "config.yaml": self.output_dir / ".hydra" / "config.yaml",
                 "model_card.md": successor_dir / "README.md"}  # fmt: skip
        publish(experiment, results, files, successor_dir, self.config.logger.wandb.get("log_model", False))


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


def _settings(cfg: DictConfig, method: CompressionMethod, models: TaskModels) -> dict[str, Any]:
    """The values a sweep varies, flat, so a report can group runs by them (``theseus.init``: the layers ``method``
    started from). The replacement schedule and the phases' settings only for a method that replaces modules: a
    baseline ignores them, and runs of it at two ``replacement.p`` would read as two grid points."""
    flat: dict[str, Any] = {}
    if method.needs_schedule:
        flat.update({f"replacement.{key}": value for key, value in cfg.replacement.items() if key != "kind"})
        flat.update({"theseus.finetune_shared": cfg.theseus.finetune_shared,
                     "theseus.lr_schedule": cfg.theseus.lr_schedule})  # fmt: skip
    flat.update({
        "optimizer.lr": cfg.optimizer.lr,
        **budget_settings(cfg.trainer),
        "theseus.successor_layers": cfg.theseus.successor_layers,
        "theseus.init": method.start_layers(cfg.theseus.init, models),
        "theseus.successor._target_": cfg.theseus.successor._target_,
        "theseus.successor.intermediate_size": cfg.theseus.successor.intermediate_size,
        "theseus.successor.importance": cfg.theseus.successor.get("importance"),
        "theseus.successor.hidden_size": cfg.theseus.successor.get("hidden_size"),
        "ablation": cfg.get("ablation"),
        "model": cfg.model.predecessor or cfg.model.base,
        "seed": cfg.seed,
    })  # fmt: skip
    flat.update({f"method.{key}": value for key, value in cfg.method.items() if key not in ("name", "_target_")})
    return flat


def _data_facts(config: TaskModelConfig, datamodule: TextTaskDataModule) -> DataFacts:
    """What the model card says about the data: sizes, labels, and the hub dataset (GLUE tasks only)."""
    task = datamodule.task
    return DataFacts(
        train_size=len(datamodule.split("train")),
        eval_size=sum(len(datamodule.split(split)) for split in task.eval_splits),
        eval_splits=list(task.eval_splits),
        text_columns=list(task.text_columns),
        labels=list(task.label_names),
        source=datamodule.source.describe(task),
        dataset=config.data.hub_dataset if task.hub_config and not config.data.files else None,
        dataset_config=task.hub_config,
    )


CALIBRATION_ROWS = 128  # the training rows successors are measured on: activation importance, hidden-width PCA


def calibration_batches(datamodule: TextTaskDataModule) -> list[dict[str, torch.Tensor]]:
    """The first training rows, in batches as training forms them: the same rows on every run of a seed."""
    split = datamodule.split("train")
    rows = list(split.select(range(min(CALIBRATION_ROWS, len(split)))))
    size = datamodule.batch_size
    return [dict(datamodule.collate(rows[start : start + size])) for start in range(0, len(rows), size)]


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _speedup(
    predecessor: torch.nn.Module, successor: torch.nn.Module, datamodule: TextTaskDataModule, config: TaskModelConfig
) -> tuple[float, float | None]:
    device = "cuda" if uses_gpu(str(config.trainer.get("accelerator", "auto"))) else "cpu"
    split = datamodule.split(datamodule.task.eval_splits[0])
    rows = split.select(range(min(config.benchmark.batch_size, len(split))))
    batch = {k: v.to(device) for k, v in datamodule.collate(list(rows)).items()}
    return inference_speedup(predecessor.to(device), successor.to(device), batch, config.benchmark.repeats)
