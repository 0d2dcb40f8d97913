"""The predecessor: a given fine-tuned checkpoint, or the base model fine-tuned on the task once and cached.

Every run of a sweep that shares the base model, task, data and fine-tuning settings reuses one cached
predecessor: the cache key holds everything that determines it. When several jobs need it at once, one fine-tunes
and the others wait for it; a damaged entry is rebuilt (``cache_entry``). A fine-tuning killed midway (an hour at
base size on a CPU) continues from its last checkpoint when a run needs the same predecessor again: its work
folder, beside the entry it will become, is named by the same key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import transformers
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel

from theseus_pl.app.predecessors.resumable_training import train_resumably, work_folder
from theseus_pl.core.io import is_sequence_classifier
from theseus_pl.data.cache_entry import folder_contents, load_or_build
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.tasks import TaskSpec, head_label_problem, trained_on_problem
from theseus_pl.lightning.callbacks import BestCheckpoint, DivergedError
from theseus_pl.lightning.evaluation import evaluate
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import FineTuningModule

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Predecessor:
    directory: str  # folder or hub id holding model and tokenizer
    origin: str  # "given", "cache" or "fine-tuned"
    # A cached predecessor's dev metrics, measured once when it was fine-tuned (None: evaluate it). Its cache key
    # holds the dev rows and the precision, so they are what this run would measure (up to the float noise of
    # another data.eval_batch_size); every job of a sweep saves one predecessor evaluation.
    dev_metrics: dict[str, float] | None = None


RECORD = "predecessor.json"  # how a predecessor this tool fine-tuned was made: written once, read by the run


def looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists() or name.count("/") > 1


def _record(predecessor: str) -> dict[str, Any] | None:
    """How a predecessor this tool fine-tuned was made (its ``predecessor.json``); None for a hub id or a folder made
    elsewhere, whose origin nothing here records."""
    try:
        record = json.loads((Path(predecessor).expanduser() / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def made_from(predecessor: str) -> str | None:
    """The base a predecessor this tool fine-tuned was made from; None for one made elsewhere."""
    return (_record(predecessor) or {}).get("base")


def check_fits_task(name: str, task: TaskSpec) -> None:
    """Refuse a fine-tuned predecessor whose classifier head is not the task's (:func:`head_label_problem`), or whose
    config says it is no sequence classifier at all (a bare encoder would get a random head without a word)."""
    config = AutoConfig.from_pretrained(name)
    if config.architectures and not is_sequence_classifier(config):
        raise ValueError(
            f"{name} is a {', '.join(config.architectures)}, not a fine-tuned sequence classifier (config.json, "
            f"architectures). To fine-tune it into the predecessor first, give it as model.base={name}."
        )
    # A predecessor this project cached before its record and config named its task keeps its base's
    # finetuning_task (a QNLI model given as model.base), not what it was trained on: not checked by it.
    record = _record(name) if looks_like_path(name) else None
    named = record is None or "task" in record
    problem = head_label_problem(config.id2label, task) or (trained_on_problem(config, task) if named else None)
    if problem:
        raise ValueError(f"{name} does not fit {task.name}: {problem}.")


def load_classifier(name: str, task: TaskSpec, new_head: bool = False) -> PreTrainedModel:
    """A sequence classifier with the task's label count and names, its config naming the task (``finetuning_task``:
    the successors made from it carry it, so a folder copied away from its run still says what it was trained on).

    ``new_head`` is for a pretrained base about to be fine-tuned: its head, if any, may have another size and is
    replaced. A fine-tuned predecessor must already fit the task.
    """
    if not new_head:
        check_fits_task(name, task)
    id2label = {i: label for i, label in enumerate(task.label_names)} or {0: "score"}
    verbosity = transformers.logging.get_verbosity()
    if new_head:  # transformers reports the new head (and a dropped old one) at length: expected here, so quiet
        transformers.logging.set_verbosity_error()
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            name, num_labels=task.num_labels, id2label=id2label, label2id={v: k for k, v in id2label.items()},
            ignore_mismatched_sizes=new_head, dtype=torch.float32,  # fp16/bf16 files too: fp32 weights train
            **padding_of(AutoConfig.from_pretrained(name)),
        )  # fmt: skip
    finally:
        transformers.logging.set_verbosity(verbosity)
    model.config.finetuning_task = task.name  # transformers 5 keeps it as an extra key (no longer a field of its own)
    return model


def padding_of(config: PretrainedConfig) -> dict[str, int]:
    """``pad_token_id`` for a decoder's classifier whose config has none (GPT-2's, most Llamas'): its end-of-text
    token, which the data module pads with (:class:`~theseus_pl.data.datamodule.TextTaskDataModule`). Without one a
    decoder's classifier refuses every batch of more than one row, since it finds each row's last token by it."""
    if config.pad_token_id is not None or config.eos_token_id is None:
        return {}
    eos = config.eos_token_id
    return {"pad_token_id": eos[0] if isinstance(eos, list) else eos}


def cache_key(base: str, datamodule: TextTaskDataModule, finetune: dict[str, Any], seed: int, precision: str) -> str:
    """A key of everything that changes the fine-tuned predecessor, so a sweep never reuses one trained otherwise.

    The base model (a local folder by its files' contents), the tokenizer's definition, the task (labels,
    metric, max length), the data files, the sample caps, how batches are formed, the precision, the fine-tuning
    settings and the seed. What only the compression uses (its learning rate, the schedule, the depth) is not
    in it: every run of a sweep over those shares one predecessor.
    """
    task = datamodule.task
    key = {
        "base": model_fingerprint(base),
        "tokenizer": datamodule.tokenizer_id,
        "task": [task.name, list(task.text_columns), list(task.label_names), task.metric, task.max_length],
        "data": datamodule.data_fingerprints,
        "samples": [datamodule.max_train_samples, datamodule.max_eval_samples, datamodule.seed],
        "batches": [datamodule.batch_size, datamodule.group_by_length, datamodule.pad_to_max_length],
        "precision": str(precision),
        "finetune": finetune,
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def model_fingerprint(name: str) -> str | list[str]:
    """A hub id as it is; a local folder by its files' names and contents (wherever it lies, however copied)."""
    return folder_contents(Path(name)) if looks_like_path(name) else name


def prepare_predecessor(
    base: str,
    given: str | None,
    datamodule: TextTaskDataModule,
    finetune: dict[str, Any],
    seed: int,
    cache_dir: Path,
    trainer_settings: dict[str, Any],
    every_n_steps: int | None = None,
    resumable: bool = True,
) -> Predecessor:
    """The run's predecessor: the one given, the cached one, or ``base`` fine-tuned now into the cache (where
    ``resumable``, its resume checkpoint written after every epoch's validation and every ``every_n_steps`` optimizer
    steps)."""
    if given:
        return Predecessor(str(Path(given).expanduser()) if looks_like_path(given) else given, "given")
    directory = cached_predecessor_folder(base, datamodule, finetune, seed, cache_dir, trainer_settings["precision"])

    def build(staging: Path) -> None:
        log.info("Fine-tuning %s on %s into the predecessor (cached as %s)", base, datamodule.task.name, directory)
        fine_tune(base, datamodule, finetune, staging, trainer_settings, work_folder(directory), every_n_steps,
                  resumable)  # fmt: skip

    dev_metrics, built = load_or_build(directory, load_checked, build, f"{datamodule.task.name} predecessor")
    if not built:
        log.info("Reusing the cached predecessor %s", directory)
    return Predecessor(str(directory), "fine-tuned" if built else "cache", dev_metrics)


def cached_predecessor_folder(
    base: str, datamodule: TextTaskDataModule, finetune: dict[str, Any], seed: int, cache_dir: Path, precision: str
) -> Path:
    """Where the predecessor fine-tuned from ``base`` with these settings is cached (made or not yet)."""
    return (
        cache_dir / "predecessors" / f"{datamodule.task.name}-{cache_key(base, datamodule, finetune, seed, precision)}"
    )


def fine_tuning_module(model: PreTrainedModel, task: TaskSpec, finetune: dict[str, Any]) -> FineTuningModule:
    """Every parameter of ``model`` trained on the task loss with the fine-tuning settings: how a base becomes the
    predecessor (and what ``--check`` times of it)."""
    return FineTuningModule(
        model, TaskMetrics.for_task(task),
        lr=finetune["lr"], weight_decay=finetune["weight_decay"], warmup_ratio=finetune["warmup_ratio"],
    )  # fmt: skip


def load_checked(folder: Path) -> dict[str, float] | None:
    """The entry's recorded dev metrics (None in entries cached before they were recorded), after reading what
    loading the predecessor reads first (its config, its weights' headers), without the weights."""
    AutoConfig.from_pretrained(folder)
    for weights in folder.glob("*.safetensors"):
        with safe_open(weights, framework="pt") as tensors:
            tensors.keys()
    return json.loads((folder / RECORD).read_text()).get("dev_metrics")


def fine_tune(
    base: str,
    datamodule: TextTaskDataModule,
    finetune: dict[str, Any],
    directory: Path,
    trainer_settings: dict[str, Any],
    work: Path,
    every_n_steps: int | None = None,
    resumable: bool = True,
) -> None:
    """Fine-tune every parameter of ``base`` (paper: batch 32, lr 2e-5, 4 epochs) into ``directory``; keep the best
    dev epoch. The directory then holds the model, its tokenizer and ``predecessor.json`` (how it was made, and the
    dev metrics of the kept model).

    ``work`` holds the checkpoints while it trains (:func:`train_resumably`): the best epoch's weights and
    ``last.ckpt``. A fine-tuning killed midway continues from there when called again with the same ``work``; dropout
    after the resume draws anew, so the model is close to, not bit for bit, the uninterrupted one
    (``predecessor.json`` records the step it continued from)."""
    model = load_classifier(base, datamodule.task, new_head=True)
    module = fine_tuning_module(model, datamodule.task, finetune)
    # One file, replaced in place (atomically), so that the best epoch a last.ckpt names is on disk whenever a kill
    # comes: a new file beside the old one, and the old one deleted, would leave a window where it is not.
    checkpoint = BestCheckpoint(dirpath=work, filename="best", enable_version_counter=False, monitor="val/score",
                                mode="max", save_weights_only=True)  # fmt: skip

    def check_finite(trainer: pl.Trainer) -> None:
        _require_finite(base, checkpoint.best_model_score, trainer.callback_metrics.get("train/loss"))

    resumed_at = train_resumably(
        module, work, trainer_settings, check_finite, callbacks=[checkpoint], every_n_steps=every_n_steps,
        resumable=resumable, trainer_args={"max_epochs": finetune["epochs"]}, datamodule=datamodule,
    )  # fmt: skip
    best = torch.load(work / "best.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    module.load_state_dict(best)
    made = {"base": base, "task": datamodule.task.name, "finetune": finetune,
            "dev_metrics": evaluate(model, datamodule, trainer_settings)}  # fmt: skip
    if resumed_at is not None:
        made["resumed_at_step"] = resumed_at
    model.save_pretrained(directory)
    datamodule.tokenizer.save_pretrained(directory)
    (directory / RECORD).write_text(json.dumps(made, indent=2))
    shutil.rmtree(work, ignore_errors=True)


def _require_finite(base: str, best_score: torch.Tensor | None, last_loss: torch.Tensor | None) -> None:
    """A predecessor that diverged must never enter the cache, where every later run of its settings would reuse it."""
    problems = []
    if best_score is None or not torch.isfinite(best_score):
        problems.append(f"best dev score {None if best_score is None else float(best_score)}")
    if last_loss is not None and not torch.isfinite(last_loss):
        problems.append(f"last training loss {float(last_loss)}")
    if problems:
        raise DivergedError(
            f"Fine-tuning {base} into the predecessor diverged ({', '.join(problems)}); nothing was cached. "
            "Lower finetune.lr, or check the training data."
        )
