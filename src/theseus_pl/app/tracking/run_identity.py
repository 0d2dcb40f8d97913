"""What a job is called in W&B: a group per Hydra multirun, the method as job type, a name from its swept values.

A reviewer compares the jobs of one sweep side by side, so each job's name says what sets it apart: the task,
the method and the values this job took for the overrides the sweep varies (``RTE theseus_curriculum lr=2e-05
b=0.1 steps_to_full=5000``). Swept keys come from the multirun's own record (``multirun.yaml`` in the sweep
folder, and ``hydra.sweeper.params`` of a sweep config), or, under ``wandb agent``, from the parameters the agent
hands the job; the values from the job's own overrides.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf


@dataclass(frozen=True)
class RunIdentity:
    name: str
    group: str | None
    job_type: str
    tags: list[str] = field(default_factory=list)


def run_identity(cfg: DictConfig, task: str, method: str) -> RunIdentity:
    """The W&B name, group, job type and tags of this job; ``logger.wandb.name``/``group`` win when set."""
    settings = cfg.logger.wandb
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    multirun = hydra is not None and hydra.mode == RunMode.MULTIRUN
    job_overrides = list(hydra.overrides.task) if hydra is not None else []
    swept = swept_values(job_overrides, swept_keys(hydra) if hydra is not None else set())
    if multirun and not swept:
        swept = [f"job={hydra.job.num}"]  # names stay unique within the sweep
    default_group = Path(hydra.sweep.dir).name if multirun else None
    model = cfg.model.predecessor or cfg.model.base or cfg.model.get("gguf")  # a decoder from a GGUF file
    tags = [task, method, model_tag(model), *settings.get("tags", [])]
    return RunIdentity(
        name=settings.get("name") or " ".join([task, method, *swept]),
        group=settings.get("group") or default_group,
        job_type=method,
        tags=list(dict.fromkeys(tags)),
    )


def swept_keys(hydra: DictConfig) -> set[str]:
    """Keys this job's sweep varies: comma lists of the multirun command, sweep configs' params, W&B agent args."""
    keys = set(hydra.sweeper.get("params") or {})
    multirun_record = Path(hydra.sweep.dir) / "multirun.yaml"
    if hydra.mode == RunMode.MULTIRUN and multirun_record.is_file():
        typed = OmegaConf.load(multirun_record).hydra.overrides.task
        parsed = OverridesParser.create().parse_overrides(list(typed))
        keys |= {override.key_or_group for override in parsed if override.is_sweep_override()}
    agent_parameters = os.environ.get("WANDB_SWEEP_PARAM_PATH")  # set by `wandb agent` for each run it starts
    if agent_parameters and Path(agent_parameters).is_file():
        keys |= {str(key) for key in OmegaConf.load(agent_parameters)}
    return keys


def swept_values(job_overrides: list[str], keys: set[str]) -> list[str]:
    """``short_key=value`` for each of the job's overrides whose key is swept, in the job's order.

    The short key is the last part of the dotted key (``lr`` for ``optimizer.lr``), unless two swept keys share
    it (``optimizer.lr`` and ``finetune.lr``): then both stay whole.
    """
    chosen = [
        (override.key_or_group, override.value())
        for override in OverridesParser.create().parse_overrides(job_overrides)
        if override.key_or_group in keys
    ]
    last_parts = [key.rsplit(".", 1)[-1] for key, _ in chosen]
    return [
        f"{short if last_parts.count(short) == 1 else key}={value}"
        for (key, value), short in zip(chosen, last_parts, strict=True)
    ]


def model_tag(model: str) -> str:
    """A hub id as it is; a local folder by its name (its parent's when it is called ``model``, as in packages)."""
    path = Path(model)
    if model.count("/") == 1 and not path.expanduser().exists():  # organisation/name on the hub
        return model
    return path.parent.name if path.name == "model" else path.name
