"""Run loggers: a CSV log always, and Weights & Biases when it can be had, never at the cost of the run.

Also how per-step numbers are logged without making the CPU wait for the GPU.
"""

from __future__ import annotations

import logging
import netrc
import os
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger

log = logging.getLogger(__name__)


def log_step_number(pl_module: pl.LightningModule, name: str, value: float, batch_size: int | None = None) -> None:
    """Log ``value`` for this step, on the steps whose values the loggers write (``log_every_n_steps``).

    Each ``LightningModule.log`` call costs about a millisecond of Python (Lightning copies its result records),
    which adds up to a tenth of a short GPU step, and the loggers keep only every n-th step's value anyway (the
    same rule as Lightning's LearningRateMonitor). The value goes in as a CPU tensor: from a Python number
    Lightning makes a tensor on the model's device, on a GPU a blocking host-to-device copy.
    """
    trainer = pl_module._trainer  # None when a step is called by hand: nothing to log to
    if trainer is not None and trainer._logger_connector.should_update_logs:
        number = torch.tensor(value, dtype=torch.float32)
        pl_module.log(name, number, on_step=True, on_epoch=False, batch_size=batch_size)


def wandb_mode(mode: str = "auto") -> str:
    """``auto``: ``$WANDB_MODE`` if set, else online when an API key is configured, else offline (no account)."""
    if mode != "auto":
        return mode
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    try:
        return "online" if netrc.netrc().authenticators("api.wandb.ai") else "offline"
    except (FileNotFoundError, netrc.NetrcParseError):
        return "offline"


def wandb_logger(
    save_dir: Path, project: str, name: str | None, mode: str, config: dict[str, Any]
) -> WandbLogger | None:
    """A started W&B run, or None (with a warning) if W&B cannot start: the run goes on with the CSV log."""
    import wandb

    resolved = wandb_mode(mode)
    if resolved == "disabled":
        return None
    try:
        logger = WandbLogger(
            project=project,
            name=name,
            save_dir=str(save_dir),
            mode=resolved,
            settings=wandb.Settings(init_timeout=60, silent=True),
        )
        logger.experiment.config.update(config, allow_val_change=True)
    except Exception as error:  # any failure to reach or start W&B must not cost the user the run
        log.warning("Weights & Biases is unavailable (%s: %s); logging to CSV only.", type(error).__name__, error)
        return None
    log.info("Weights & Biases run in %s mode, files under %s", resolved, save_dir)
    return logger


def build_loggers(output_dir: Path, wandb_settings: dict[str, Any], config: dict[str, Any]) -> list[Logger]:
    loggers: list[Logger] = [CSVLogger(save_dir=str(output_dir), name="csv", version="")]
    if wandb_settings.get("enabled", True):
        run = wandb_logger(
            output_dir, wandb_settings.get("project", "theseus_pl"), wandb_settings.get("name"),
            wandb_settings.get("mode", "auto"), config,
        )  # fmt: skip
        if run is not None:
            loggers.append(run)
    return loggers
