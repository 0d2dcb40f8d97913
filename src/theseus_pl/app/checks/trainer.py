"""What Lightning's Trainer would make of a run's ``trainer`` settings, asked before any compute, for every kind of run:
a GPU asked for where there is none, bf16 where this torch build cannot, a strategy or key Lightning refuses (each
named with its fix), and the Trainer the run would build (how many processes train)."""

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

from theseus_pl.core.precision import AUTO, CPU_BF16_FLAGS, cpu_bf16_problem, this_cpu, uses_gpu
from theseus_pl.lightning.quiet import quiet_trainer_construction


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
