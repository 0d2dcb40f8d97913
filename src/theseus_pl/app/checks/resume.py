"""Resuming an interrupted run, checked before any compute: its ``checkpoints/last.ckpt`` read, and the settings that
trained it compared with the command's.

Every checkpoint a run writes carries the run's settings (:class:`~theseus_pl.lightning.callbacks.SettingsInCheckpoint`)
but those that cannot change what a training step computes (:data:`FREE_TO_CHANGE`: where things are written, what is
logged, and what runs after training). A rerun into the folder resumes only when every other setting is the same:
otherwise the run would go on under settings that did not produce its first steps, and its ``results.json`` would
record them as if they had (a run resumed with another ``theseus.successor_layers`` would not even load its weights).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from theseus_pl.app.config.run_folder import last_checkpoint
from theseus_pl.lightning.callbacks import DATA_KEY, PRECISION_KEY, SETTINGS_KEY

log = logging.getLogger(__name__)

# Settings a resumed run may change: where it writes, what it logs, and what it does once training is over (timing,
# deployment, evaluation beyond the dev score); threads, activation checkpointing (the same gradients), the
# checkpoint's own cadence, and callbacks that only watch (a progress bar, the learning rate's log, one of your own).
# Each key covers the keys below it.
FREE_TO_CHANGE = (
    "hydra", "paths", "logger", "resume", "checkpoint", "benchmark", "deploy", "evaluation", "threads",
    "check_steps", "activation_checkpointing", "callbacks", "trainer.enable_progress_bar",
    "trainer.enable_model_summary", "trainer.log_every_n_steps", "trainer.default_root_dir",
)  # fmt: skip
# ... but for the callbacks that choose the model the run scores and when it stops.
SHAPING_CALLBACKS = (
    "callbacks.early_stopping",
    "callbacks.model_checkpoint.monitor",
    "callbacks.model_checkpoint.mode",
)
NOT_SET = "(not set)"
# The option that runs a refused command in another folder: a run's, and a sweep job's (whose folder the sweep's is)
RUN_ELSEWHERE = "hydra.run.dir=ANOTHER_FOLDER"
SWEEP_ELSEWHERE = "hydra.sweep.dir=ANOTHER_FOLDER"
PRECISION = "trainer.precision"  # what the user asks for (auto); the precision in effect is compared apart


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a run resumes from and the optimizer step it was saved at."""

    path: Path
    step: int
    precision: str | None = None  # the one it trained in (None in checkpoints written before it was recorded)
    data: str | None = None  # the fingerprint of the data it trained on (None where the kind or its version gave none)


def training_settings(cfg: DictConfig) -> dict[str, Any]:
    """The run's settings that shape its training, flat (``optimizer.lr``) and resolved: what its checkpoints record
    and a resume must repeat."""
    flat = _flat(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    return {key: value for key, value in flat.items() if not _free_to_change(key)}


def resume_problems(
    output_dir: Path, cfg: DictConfig, elsewhere: str = RUN_ELSEWHERE
) -> tuple[ResumePoint | None, list[str]]:
    """Where a rerun of ``cfg`` into ``output_dir`` resumes (None: it starts afresh), or what stops it: a checkpoint
    that cannot be read, or one trained with other settings than the command's, each key named with both values
    (those set by interpolation, ``data.seed: ${seed}``, only where nothing else differs). ``elsewhere``: the
    option that runs it in another folder (a sweep's job: :data:`SWEEP_ELSEWHERE`)."""
    last = last_checkpoint(output_dir)
    if cfg.resume is not True or not last.is_file():
        return None, []
    try:  # memory-mapped: the weights are not read
        checkpoint = torch.load(last, map_location="cpu", weights_only=False, mmap=True)
        step = int(checkpoint["global_step"])
    except Exception as error:  # a file cut short, or not a checkpoint: torch's reasons are many and unnamed
        return None, [
            f"{last} cannot be read ({type(error).__name__}: {error}); it was cut short or is not a checkpoint. Start "
            f"over with resume=false (the run trains from step 0 in this folder), or delete {last.parent}."
        ]
    recorded = checkpoint.get(SETTINGS_KEY)
    if recorded is None:
        log.warning("%s records no settings (an earlier theseus_pl wrote it): resuming without comparing them.", last)
        return ResumePoint(last, step), []
    settings = training_settings(cfg)
    differ = [key for key in sorted({*recorded, *settings}) if recorded.get(key, NOT_SET) != settings.get(key, NOT_SET)]
    trained_in = checkpoint.get(PRECISION_KEY)
    if trained_in is not None:  # the precision in effect is compared once this machine's is known (precision_problems)
        differ = [key for key in differ if key != PRECISION]
    if not differ:
        return ResumePoint(last, step, trained_in, checkpoint.get(DATA_KEY)), []
    return None, [
        f"{last} (step {step}) was trained with other settings than this command's: "
        f"{_both_values(cfg, differ, recorded, settings)}. Rerun with its settings to resume, resume=false to start "
        f"over in this folder, or {elsewhere} for a new run."
    ]


def resumed_data_problems(resumed: ResumePoint | None, fingerprint: str | None, data: str) -> list[str]:
    """A resume onto other data than its checkpoint's (files added or edited under the same ``data.files``): its first
    steps were not this data's, and a decoder LM's held-out documents would be drawn anew (one trained on, scored as
    held out). ``data``: what the run trains on now, in words."""
    if resumed is None or resumed.data is None or fingerprint is None or resumed.data == fingerprint:
        return []
    return [
        f"{resumed.path} (step {resumed.step}) was trained on other data than this command's {data} (files added or "
        "changed since): its first steps would not be this data's (and a decoder LM's held-out documents would be "
        "drawn anew). Restore the data to resume, resume=false to start over in this folder, or "
        "hydra.run.dir=ANOTHER_FOLDER for a new run."
    ]


def precision_problems(resumed: ResumePoint | None, precision: str, requested: str) -> list[str]:
    """A resume that would train on in another precision than its checkpoint's: ``trainer.precision=auto`` chooses by
    the machine, so a run moved to another (back from a GPU node, to a CPU without bf16) would go on in another
    precision, and its ``results.json`` would name one for the whole run."""
    if resumed is None or resumed.precision in (None, precision):
        return []
    chosen = f"{PRECISION}=auto chose it on this machine" if requested == "auto" else f"{PRECISION}={requested}"
    return [
        f"{resumed.path} (step {resumed.step}) was trained in {resumed.precision}; this command would go on in "
        f"{precision} ({chosen}). Rerun with {PRECISION}={resumed.precision} to resume in it, resume=false to start "
        "over in this folder, or hydra.run.dir=ANOTHER_FOLDER for a new run."
    ]


def finished_run_problems(
    output_dir: Path,
    cfg: DictConfig,
    recorded_settings: Mapping[str, Any] | None = None,
    elsewhere: str = RUN_ELSEWHERE,
) -> list[str]:
    """A command that would leave the finished run in ``output_dir`` as it is, though it asks for other settings than
    those that trained it (its ``.hydra/config.yaml``): it would end as if it had run what it asked for. Settings
    only one of the two configs has (another version of theseus_pl wrote it) are not compared. Without Hydra's record
    (a run made from Python, or the file deleted), the values its ``results.json`` recorded (``recorded_settings``,
    the run's ``settings``) are compared where the command's config has them."""
    composed = output_dir / ".hydra" / "config.yaml"
    if cfg.resume == "force" or not (output_dir / "results.json").is_file():
        return []
    if not composed.is_file():
        return _recorded_settings_problems(output_dir, cfg, recorded_settings or {}, elsewhere)
    recorded_config = OmegaConf.load(composed)
    recorded_config.paths = cfg.paths  # free to change, and resolved by Hydra's resolver only inside the run's job
    try:
        recorded = training_settings(recorded_config)  # type: ignore[arg-type]
    except Exception as error:  # an interpolation this version cannot resolve: nothing to compare against
        log.warning("%s cannot be resolved (%s): the finished run's settings are not compared.", composed, error)
        return []
    settings = training_settings(cfg)
    differ = [key for key in sorted(recorded.keys() & settings.keys()) if recorded[key] != settings[key]]
    return _other_settings(output_dir, _both_values(cfg, differ, recorded, settings), elsewhere) if differ else []


# Keys of a record's settings that are no config paths, or not the config's value: the model the run named
# (model.predecessor or model.base), the layers the method started from (every_other for LayerDrop, whatever is set).
NOT_AS_CONFIGURED = ("model", "theseus.init")


def _recorded_settings_problems(
    output_dir: Path, cfg: DictConfig, recorded: Mapping[str, Any], elsewhere: str
) -> list[str]:
    absent = object()
    here = {key: OmegaConf.select(cfg, key, default=absent) for key in recorded if key not in NOT_AS_CONFIGURED}
    here = {key: OmegaConf.to_container(v) if isinstance(v, DictConfig | ListConfig) else v for key, v in here.items()}
    differ = [key for key, value in here.items() if value is not absent and value != recorded[key]]
    values = "; ".join(f"{key}={recorded[key]} there, {here[key]} here" for key in differ)
    return _other_settings(output_dir, f"{values} (its results.json: it has no .hydra/config.yaml)", elsewhere) \
        if differ else []  # fmt: skip


def _other_settings(output_dir: Path, values: str, elsewhere: str) -> list[str]:
    return [
        f"{output_dir} holds a finished run of other settings than this command's: {values}; it would be left as it "
        f"is. Fix: resume=force to redo it here with this command's settings, or {elsewhere} for a new run."
    ]


def _both_values(cfg: DictConfig, differ: list[str], recorded: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    """Each differing key with its value there and here; keys set by interpolation (``data.seed: ${seed}``) only
    where nothing else differs."""
    interpolated = {key for key, value in _flat(OmegaConf.to_container(cfg)).items() if "${" in str(value)}
    named = [key for key in differ if key not in interpolated] or differ
    return "; ".join(f"{key}={recorded.get(key, NOT_SET)} there, {settings.get(key, NOT_SET)} here" for key in named)


def _free_to_change(key: str) -> bool:
    return _under(key, FREE_TO_CHANGE) and not _under(key, SHAPING_CALLBACKS)


def _under(key: str, prefixes: tuple[str, ...]) -> bool:
    return any(key == prefix or key.startswith(f"{prefix}.") for prefix in prefixes)


def _flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
