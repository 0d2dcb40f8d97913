"""Run loggers: a CSV log always, and Weights & Biases when it can be had, never at the cost of the run."""

from __future__ import annotations

import csv
import logging
import netrc
import os
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger, WandbLogger

from theseus_pl.app.results.envelope import RunRecord
from theseus_pl.app.tracking.run_identity import RunIdentity
from theseus_pl.lightning._compat import without_wandb_anonymous

log = logging.getLogger(__name__)


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


WANDB_MODES = ("auto", "online", "offline", "disabled")


# Seconds W&B gets to start online when the settings do not say (conf/logger/default.yaml does: the same 10).
DEFAULT_INIT_TIMEOUT = 10


def wandb_setting_problems(settings: dict[str, Any]) -> list[str]:
    """Each W&B setting of the wrong type or value, with the fix (Hydra types ``name=123`` as int)."""
    problems = []
    for key in ("project", "entity", "group", "name"):
        value = settings.get(key)
        if value is not None and not isinstance(value, str):
            problems.append(
                f"logger.wandb.{key}={value!r} is a {type(value).__name__}; give text, quoted if it looks like a "
                f"number: 'logger.wandb.{key}=\"{value}\"'."
            )
    tags = settings.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        problems.append(f"logger.wandb.tags={tags!r} must be a list of text, e.g. 'logger.wandb.tags=[baseline,v2]'.")
    if settings.get("mode", "auto") not in WANDB_MODES:
        problems.append(
            f"logger.wandb.mode={settings.get('mode')!r} is unknown; choose one of {', '.join(WANDB_MODES)}."
        )
    timeout = settings.get("init_timeout", DEFAULT_INIT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(f"logger.wandb.init_timeout={timeout!r} must be a number of seconds above 0.")
    for key in ("enabled", "log_model"):  # "no" is text, which would count as true: W&B on, against the user's word
        if not isinstance(value := settings.get(key, False), bool):
            problems.append(f"logger.wandb.{key}={value!r} must be true or false.")
    if settings.get("log_model") is True and (
        settings.get("enabled", True) is False or wandb_mode(settings.get("mode", "auto")) == "disabled"
    ):
        problems.append(
            "logger.wandb.log_model=true uploads the exported successor to a W&B run, but W&B is off here "
            "(logger=csv, logger.wandb.enabled=false or mode disabled): turn W&B on or drop log_model."
        )
    return problems


# Why W&B could not start online earlier in this process, if it could not: the later jobs of a multirun run in this
# process go straight to offline mode instead of waiting out the timeout again.
_online_failure: str | None = None


def wandb_logger(
    save_dir: Path, settings: dict[str, Any], identity: RunIdentity, config: dict[str, Any], run_id: str | None = None
) -> WandbLogger | None:
    """A started W&B run, or None (with a warning) if W&B cannot start: the run goes on with the CSV log.

    Online, W&B gets ``init_timeout`` seconds to start; if it cannot, this job and the rest of the process log
    offline (``wandb sync`` uploads them later), which is said once.
    """
    global _online_failure
    mode = wandb_mode(settings.get("mode", "auto"))
    if mode == "disabled":
        return None
    if mode == "online" and _online_failure:
        mode = "offline"
    try:
        logger = _start_wandb(mode, save_dir, settings, identity, config, run_id)
    except Exception as error:  # any failure to reach or start W&B must not cost the user the run
        reason = f"{type(error).__name__}: {next(iter(str(error).splitlines()), '')}"  # W&B's first line
        if mode != "online":
            log.warning("Weights & Biases is unavailable (%s); logging to CSV only.", reason)
            return None
        _online_failure = reason
        log.warning(
            "Weights & Biases could not start online within logger.wandb.init_timeout=%s s (%s). This job and the "
            "later ones in this process log to W&B offline; `wandb sync <run folder>/wandb/offline-run-*` uploads "
            "them.", settings.get("init_timeout", DEFAULT_INIT_TIMEOUT), reason,
        )  # fmt: skip
        return wandb_logger(save_dir, settings, identity, config, run_id)
    log.info("Weights & Biases run %r (group %s) in %s mode, files under %s", identity.name, identity.group, mode,
             save_dir)  # fmt: skip
    return logger


def _start_wandb(
    mode: str,
    save_dir: Path,
    settings: dict[str, Any],
    identity: RunIdentity,
    config: dict[str, Any],
    run_id: str | None,
) -> WandbLogger:
    """Start the run (``run_id``: continue that one, as Lightning's ``resume="allow"`` does) and note its id."""
    import wandb

    logger = WandbLogger(
        project=settings.get("project", "theseus_pl"),
        entity=settings.get("entity"),
        name=identity.name,
        group=identity.group,
        job_type=identity.job_type,
        tags=identity.tags,
        save_dir=str(save_dir),
        id=run_id,
        mode=mode,
        settings=wandb.Settings(init_timeout=settings.get("init_timeout", DEFAULT_INIT_TIMEOUT), silent=True),
    )
    run = without_wandb_anonymous(logger).experiment  # W&B starts here, with no deprecation warning
    run.config.update(config, allow_val_change=True)
    # The dashboard's headline: the best dev score, not the last one logged (its step: final/best_step at the end).
    run.define_metric("val/score", step_metric="trainer/global_step", summary="max")
    run.define_metric("train/*", step_metric="trainer/global_step")  # p, phase, replaced modules, loss
    _run_id_file(save_dir).write_text(run.id)
    return logger


def _run_id_file(save_dir: Path) -> Path:
    """Where a run folder keeps its W&B run's id, so that resuming it continues the same W&B run."""
    return save_dir / "wandb" / "run_id"


def build_loggers(
    output_dir: Path,
    wandb_settings: dict[str, Any],
    config: dict[str, Any],
    identity: RunIdentity,
    resume_step: int | None = None,
) -> list[Logger]:
    """The CSV log, and a W&B run named by ``identity`` when W&B is on and can start.

    ``resume_step``: the run continues from a checkpoint at that step, so its CSV log keeps the rows before it and
    its W&B run continues (same id).
    """
    # Every row reaches the disk when it is logged: a killed run loses none that its checkpoint has passed.
    csv_logger = CSVLogger(save_dir=str(output_dir), name="csv", version="", flush_logs_every_n_steps=1)
    if resume_step is not None:
        _keep_rows_before(csv_logger, resume_step)
    loggers: list[Logger] = [csv_logger]
    if wandb_settings.get("enabled", True):
        id_file = _run_id_file(output_dir)
        run_id = id_file.read_text().strip() if resume_step is not None and id_file.is_file() else None
        run = wandb_logger(output_dir, wandb_settings, identity, config, run_id)
        if run is not None:
            loggers.append(run)
    return loggers


def _keep_rows_before(logger: CSVLogger, step: int) -> None:
    """Carry the rows an interrupted run logged before ``step`` into the new log (Lightning's CSV writer starts the
    file afresh); the rows from ``step`` on are logged again by the resumed run."""
    path = Path(logger.log_dir) / "metrics.csv"
    if not path.is_file():
        return
    with path.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("step") and int(row["step"]) < step]
    for row in rows:
        values = {key: float(value) for key, value in row.items() if key != "step" and value != ""}
        logger.log_metrics(values, step=int(row["step"]))
    logger.save()


def log_summary_row(loggers: list[Logger], record: RunRecord, step: int) -> None:
    """The run's final numbers (its record's ``summary()``) as the last row of ``csv/metrics.csv``; the W&B run gets
    them in its summary."""
    for logger in loggers:
        if isinstance(logger, CSVLogger):
            logger.log_metrics(record.summary(), step=step)
            logger.save()
