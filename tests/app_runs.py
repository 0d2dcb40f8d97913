"""The app's config as the command line composes it, and the overrides of a whole run in seconds."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.config.resolvers import register_resolvers

register_resolvers()  # the app's ${package_path:...}, ${mul:...} in composed configs


def compose_config(*overrides: str) -> DictConfig:
    """The app's config as ``python -m theseus_pl <overrides>`` composes it (output folder left to the caller)."""
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        return compose("train", overrides=["paths.output_dir=unused", *overrides])


def setting_problems(cfg: DictConfig) -> list[str]:
    """Every problem the settings check finds with the options set (the run refuses them all at once)."""
    return checked_settings(cfg).problems


def tiny_run_overrides(tiny_base: Path, glue_dir: Path, tmp_path: Path, output: str = "run") -> list[str]:
    """A whole app run in seconds: tiny model, tiny RTE, 6 steps, CSV log only."""
    return [
        f"model.base={tiny_base}", f"data.glue_dir={glue_dir}", "data.task=RTE", "data.batch_size=4",
        "theseus.successor_layers=2", "finetune.epochs=1", "schedule_steps=3", "trainer=cpu", "trainer.max_steps=6",
        "trainer.val_check_interval=2", "trainer.log_every_n_steps=1", "logger=csv", "optimizer.lr=1e-3",
        "benchmark.repeats=1",
        f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / output}",
    ]  # fmt: skip
