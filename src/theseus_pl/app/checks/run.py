"""Everything that can be known to be wrong with a run before it starts, found in one pass, said in one message.

Before any training and before W&B starts, in one round: the settings (``checks.settings``, built and checked once
per run and handed in here), the models and data the run reads (``checks.resources``), the machine (a GPU asked for),
what the predecessor's config says (the successor's depth and widths, the sequence length, its classifier head
against the data's labels; no weights are loaded), and, for a method trained by the replacement schedule, whether
it ends inside the run. When anything is wrong, the data files are also read (not tokenised) so that their
problems come in the same message; otherwise they are read and tokenised (then cached for the run) and only what
needs the tokenizer can still refuse the run.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

import lightning.pytorch as pl
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from omegaconf import DictConfig, OmegaConf
from transformers import AutoConfig, PretrainedConfig

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resources import checked_resources
from theseus_pl.app.checks.schedule import monitor_problems, schedule_problems, validation_problems
from theseus_pl.app.checks.settings import RunSettings
from theseus_pl.app.config.kinds import data_module_settings
from theseus_pl.app.config.terms import SUCCESSOR_SETTINGS, in_config_terms, naming_group
from theseus_pl.app.methods.method import TheseusSettings
from theseus_pl.app.predecessors.classifier import check_fits_task
from theseus_pl.core.memory import checkpointing_problem
from theseus_pl.core.precision import AUTO, CPU_BF16_FLAGS, cpu_bf16_problem, this_cpu, uses_gpu
from theseus_pl.core.replacing import module_sizes
from theseus_pl.core.settings import positive_int
from theseus_pl.core.successors.copied import intermediate_size_problem
from theseus_pl.core.successors.narrow_width import hidden_size_problem
from theseus_pl.data.datamodule import TextTaskDataModule, resolve_source, resolve_task, sample_rows
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.quiet import quiet_trainer_construction


def checked_datamodule(cfg: DictConfig, settings: RunSettings) -> TextTaskDataModule:
    """The run's data module, its splits read and tokenised; :class:`RunRefused` listing all problems otherwise.

    ``settings`` are the run's settings as :func:`~theseus_pl.app.checks.settings.checked_settings` built them."""
    start_model = cfg.model.predecessor or cfg.model.base
    resources = checked_resources(cfg, settings.method)
    problems = settings.problems + [problem for found in resources.values() for problem in found]
    problems += device_problems(cfg)
    task = _task(cfg)
    if task is not None:
        problems += monitor_problems(cfg, TaskMetrics.for_task(task).logged)
    start_key = "model.predecessor" if cfg.model.predecessor else "model.base"
    if not resources[start_key]:
        try:
            config = AutoConfig.from_pretrained(start_model)
        except (OSError, ValueError) as error:  # a folder without a config.json, or one transformers cannot read
            problems.append(f"{start_key}={start_model!r}: its config cannot be read: {error}")
        else:
            problems += model_fit_problems(cfg, start_model, config, task, settings)
    if problems:
        read_problems, train_rows = file_problems(cfg, task) if task is not None else ([], None)
        problems += read_problems
        if not read_problems:
            problems += schedule_problems(cfg, settings, train_rows) + validation_problems(cfg, train_rows)
        raise RunRefused(list(dict.fromkeys(problems)))  # a missing file is found by the preflight and the read
    datamodule: TextTaskDataModule = instantiate(data_module_settings(cfg.data), tokenizer=start_model)
    problems = task_data_problems(datamodule) + length_problems(start_model, datamodule)
    if not problems:
        rows = len(sample_rows(datamodule.load("train"), datamodule.max_train_samples, datamodule.seed))
        problems += schedule_problems(cfg, settings, rows) + validation_problems(cfg, rows)
    if problems:
        raise RunRefused(problems)
    return datamodule


def device_problems(cfg: DictConfig) -> list[str]:
    """A GPU asked for on a machine without one, or more GPUs than it has (Lightning would say so only after the data
    is tokenised, under a traceback), bf16 asked for on a CPU where this torch build has no bf16 autocast, and
    trainer settings Lightning refuses (a validation interval it cannot count among them)."""
    accelerator = str(cfg.trainer.get("accelerator", "auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        return [
            f"trainer.accelerator={accelerator} (trainer=gpu, trainer=ddp) needs a CUDA GPU, and torch sees none on "
            "this machine. Fix: trainer=cpu, or trainer=default (a GPU when there is one, else the CPU)."
        ]
    devices, available = cfg.trainer.get("devices", 1), torch.cuda.device_count()
    if accelerator in ("gpu", "cuda") and isinstance(devices, int) and devices > available:
        return [
            f"trainer.devices={devices} asks for more GPUs than the {available} torch sees on this machine. Fix: "
            f"trainer.devices={available} (or -1: every GPU)."
        ]
    # auto is resolved when the run starts (on some CPUs by a measurement, which a refused run must not make); on a
    # CPU it can mean bf16 only where the CPU has bf16 instructions
    requested = str(cfg.trainer.get("precision", AUTO))
    bf16_on_cpu = requested.startswith("bf16") or (requested == AUTO and bool(this_cpu().flags & CPU_BF16_FLAGS))
    if bf16_on_cpu and not uses_gpu(accelerator) and (problem := cpu_bf16_problem()):
        return [
            f"trainer.precision={requested} trains under bf16 autocast on this CPU, which this torch build cannot do "
            f"({problem}). Fix: trainer.precision=32-true."
        ]
    interval, every_epochs = cfg.trainer.get("val_check_interval"), cfg.trainer.get("check_val_every_n_epoch")
    if isinstance(interval, float) and every_epochs is None:  # refused by Lightning; said here with its own fix
        return [
            f"trainer.val_check_interval={interval} is a share of an epoch, which Lightning takes only where "
            "validation is counted within epochs (trainer.check_val_every_n_epoch=null counts batches over the whole "
            "run). Fix: a whole number of steps (trainer.val_check_interval=100), or trainer.check_val_every_n_epoch=1."
        ]
    try:
        planned_trainer(cfg, "32-true" if requested == AUTO else requested)
    except InstantiationException as wrapped:  # Hydra's, around Lightning's own refusal
        error = wrapped.__cause__
        if isinstance(error, TypeError):  # a key the Trainer does not take (+trainer.max_step=5)
            return [unknown_trainer_argument(cfg.trainer, error)]
        if not isinstance(error, ValueError | MisconfigurationException | ImportError):  # ImportError: a plugin's
            raise  # package not installed (trainer.precision=transformer-engine)
        return lightning_refusals(cfg.trainer, error)
    return []


PLACEMENT = ("accelerator", "strategy", "devices", "num_nodes")  # where and in how many processes a run trains
OWN_FIXES = {"precision": "Fix: trainer.precision=auto (bf16-mixed where it is faster, else 32-true), 32-true or "
                          "bf16-mixed."}  # fmt: skip


def lightning_refusals(trainer: DictConfig, error: Exception) -> list[str]:
    """Lightning's refusal of the trainer settings, naming the settings it is about: each setting outside the
    placement that Lightning refuses on its own (``trainer.precision=17``, ``trainer.limit_val_batches=-1``), else
    the placement (accelerator, strategy, devices), with a strategy Lightning offers as the fix."""
    settings: dict[str, Any] = OmegaConf.to_container(trainer, resolve=True)  # type: ignore[assignment]
    refused = []
    for key, value in settings.items():
        if key in (*PLACEMENT, "_target_") or (key == "precision" and value == AUTO):
            continue
        try:
            with quiet_trainer_construction():
                pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, **{key: value})
        except (ValueError, MisconfigurationException, ImportError) as alone:
            fix = f" {OWN_FIXES[key]}" if key in OWN_FIXES else ""
            refused.append(f"trainer.{key}={value}: Lightning refuses it: {alone}{fix}")
    if refused:
        return refused
    given = ", ".join(f"trainer.{key}={trainer.get(key)}" for key in ("accelerator", "strategy", "devices"))
    return [
        f"Lightning refuses the trainer settings ({given}): {error} Fix: a strategy Lightning offers on this "
        "accelerator: trainer=ddp on GPUs, or trainer=cpu trainer.devices=2 "
        "trainer.strategy=ddp_find_unused_parameters_true for processes on the CPU."
    ]


def unknown_trainer_argument(trainer: DictConfig, error: TypeError) -> str:
    """A ``trainer`` key that Lightning's Trainer does not take, with the nearest ones it does."""
    taken = [name for name in inspect.signature(pl.Trainer).parameters if name != "self"]
    unknown = [key for key in trainer if key != "_target_" and key not in taken]
    if not unknown:
        return f"Lightning's Trainer refuses the trainer settings: {error}"
    near = difflib.get_close_matches(unknown[0], taken, n=2)
    hint = f"did you mean trainer.{' or trainer.'.join(near)}?" if near else "remove it."
    return f"trainer.{unknown[0]} is no setting of Lightning's Trainer: {hint}"


def planned_trainer(cfg: DictConfig, precision: str) -> pl.Trainer:
    """The Trainer the run would build, without its loggers and callbacks: what Lightning makes of the trainer
    settings (whether it refuses them: FSDP on a CPU, an unknown strategy; how many processes train), by Lightning's
    own rules, before any compute. Nothing is launched before ``fit``."""
    with quiet_trainer_construction():
        return instantiate(cfg.trainer, logger=False, enable_checkpointing=False, precision=precision)


def _task(cfg: DictConfig) -> TaskSpec | None:
    """The run's task, None when the data settings do not make one (the preflight has said why)."""
    data = cfg.data
    try:
        return resolve_task(data.task, data.files, data.text_columns, data.labels, data.regression, data.metric,
                            data.max_length)  # fmt: skip
    except (TypeError, ValueError):
        return None


def model_fit_problems(
    cfg: DictConfig, model: str, config: PretrainedConfig, task: TaskSpec | None, settings: RunSettings
) -> list[str]:
    """The successor depth and widths, the sequence length and a given predecessor's head against the model's config
    (no weights loaded). The depth is checked even when the ``theseus`` group has other problems."""
    problems = []
    layers = settings.theseus.successor_layers if settings.theseus else cfg.theseus.get("successor_layers")
    if positive_int(layers):
        try:
            module_sizes(config.num_hidden_layers, layers)
        except ValueError as error:
            problems.append(in_config_terms(str(error), "theseus", ["successor_layers"]))
    positions = getattr(config, "max_position_embeddings", None)
    if task is not None and positions and task.max_length > positions:
        problems.append(f"data.max_length={task.max_length} is more than {model} takes: {positions} tokens.")
    if cfg.model.predecessor and task is not None:
        try:
            check_fits_task(cfg.model.predecessor, task)
        except ValueError as error:
            problems.append(f"model.predecessor: {error}")
    if settings.method is not None and settings.theseus is not None and settings.method.takes_successor_settings:
        problems += successor_problems(settings.theseus, config)
    if cfg.get("activation_checkpointing") is True and (problem := checkpointing_problem(config, causal_lm=False)):
        problems.append(problem)
    return problems


def length_problems(model: str, datamodule: TextTaskDataModule) -> list[str]:
    """The sequence length against what the tokenizer takes (its config's positions were checked before)."""
    limit = datamodule.tokenizer.model_max_length
    if datamodule.task.max_length > limit:
        return [f"data.max_length={datamodule.task.max_length} is more than {model}'s tokenizer takes: {limit} tokens."]
    return []


def successor_problems(theseus: TheseusSettings, config: PretrainedConfig) -> list[str]:
    """Narrower feed-forward and hidden widths against the predecessor's, for a family whose layout is known (the
    library's own checks, in config terms)."""
    fits = {"intermediate_size": intermediate_size_problem, "hidden_size": hidden_size_problem}
    problems = [fits[name](config, width) for name, width in theseus.widths.items()]
    return [in_config_terms(problem, "theseus.successor", SUCCESSOR_SETTINGS) for problem in problems if problem]


def task_data_problems(datamodule: TextTaskDataModule) -> list[str]:
    """Each split read and tokenised (then cached): a bad encoding, label, field count or an empty split, by file."""
    problems = []
    for split in ("train", *datamodule.task.eval_splits):
        try:
            datamodule.load(split)
        except (OSError, ValueError, RuntimeError) as error:  # the source's own message names the file and row
            problems.append(naming_group("data", str(error)))
    return problems


def file_problems(cfg: DictConfig, task: TaskSpec) -> tuple[list[str], int | None]:
    """Each split of a local source read, not tokenised (the tokenizer may be what is missing): the problems, and
    the training rows the run would use (None when the split cannot be read, or the data is on the hub)."""
    data = cfg.data
    if not (data.files or data.glue_dir or data.get("source")):
        return [], None  # the hub: read only when the run starts
    source = (instantiate(data.source) if data.get("source")
              else resolve_source(task, data.glue_dir, data.files, data.label_column, data.hub_dataset))  # fmt: skip
    problems, train_rows = [], None
    for split in ("train", *task.eval_splits):
        try:
            rows = source.read(task, split)
        except (OSError, ValueError, RuntimeError) as error:
            problems.append(naming_group("data", str(error)))
            continue
        if split == "train":
            limit = data.max_train_samples if positive_int(data.max_train_samples) else None
            train_rows = min(len(rows), limit or len(rows))
    return problems, train_rows
