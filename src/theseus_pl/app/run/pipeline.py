"""One run behind ``python -m theseus_pl``, for every kind: checks -> predecessor -> data -> method -> train ->
evaluate -> export -> record -> optional steps (speed, deployment, card, sample) -> tracking.

The kind of run (a task model, a language model or a sentence-embedding model: ``data.kind``) is a parameter: its
:class:`RunKind` supplies what differs (how the predecessor is made, the data module, the evaluation and the record,
the optional steps, what W&B shows); every other stage is this module's and :mod:`~theseus_pl.app.run.stages`'s, the
same for every kind.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.loggers import Logger
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resume import (
    ResumePoint,
    finished_run_problems,
    precision_problems,
    resume_problems,
    resumed_data_problems,
    training_settings,
)
from theseus_pl.app.checks.schedule import total_steps
from theseus_pl.app.checks.settings import RunSettings, checked_settings
from theseus_pl.app.checks.trainer import planned_trainer
from theseus_pl.app.config.resolvers import run_kind_name
from theseus_pl.app.config.run_folder import record_command
from theseus_pl.app.methods.method import SoftTargets
from theseus_pl.app.results.envelope import Hardware, RunRecord, write_results
from theseus_pl.app.results.registry import parts
from theseus_pl.app.run.kind import RunKind
from theseus_pl.app.run.projection import projected_time
from theseus_pl.app.run.stages import (
    clear_finished_run,
    evaluation_settings,
    finished_record_in,
    optional_step,
    run_hardware,
    train,
)
from theseus_pl.app.tracking.loggers import build_loggers, log_summary_row
from theseus_pl.app.tracking.run_identity import run_identity
from theseus_pl.app.tracking.wandb_run import finish, run_link, wandb_run
from theseus_pl.core.memory import checkpoint_activations, peak_memory, start_peak_memory
from theseus_pl.deployment.record import Deployment, wanted
from theseus_pl.lightning.callbacks import RunClock
from theseus_pl.lightning.quiet import expect_own_files

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> RunRecord | None:
    """Run every stage and return the run's results record (None on DDP ranks other than 0, which write nothing).

    Refused before anything is written when a setting cannot work, every problem in one message. A finished run is
    returned as it is (``resume=force`` redoes it); an interrupted one resumes from ``checkpoints/last.ckpt``. The
    job's W&B run ends with it: finished, or failed with the error in its summary, so the next job of a multirun
    (same process under the basic and joblib launchers) starts a fresh run.
    """
    clock, memory_since = RunClock(time.perf_counter()), start_peak_memory()
    output_dir = Path(cfg.paths.output_dir)
    settings = checked_settings(cfg)  # each group's settings object, built and checked once, for every kind
    finished = None if settings.problems else finished_record_in(output_dir, cfg)
    if finished is not None:
        return finished
    resumed, resume_refusals = resume_problems(output_dir, cfg)
    kind = run_kind(cfg, settings)
    _check(kind, resume_refusals)  # before any training and before W&B starts
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    pl.seed_everything(cfg.seed, workers=True)
    fingerprint = _prepared_data(kind, resumed)
    if clear_finished_run(output_dir, cfg.resume):  # every check passed: resume=force's old run goes now
        record_command(cfg, output_dir)  # and the folder's record is the command redoing it (W&B uploads it)
    output_dir.mkdir(parents=True, exist_ok=True)
    hardware = run_hardware(cfg.trainer, kind.cache_dir, output_dir)
    _check_precision(resumed, hardware)
    log.info("Training in %s: %s.", hardware.precision, hardware.precision_reason)
    evaluation = evaluation_settings(cfg.trainer, hardware.precision)
    kind.prepare_predecessor(evaluation)
    # Resolved: sweeps set values by interpolation (rates_equivalent_lr's lr = lr'/p, the protocol's grid points).
    method = settings.method.build(kind.method_inputs(OmegaConf.to_container(cfg.optimizer, resolve=True)))
    if cfg.get("activation_checkpointing") and method.module is not None:
        switched = checkpoint_activations(method.module)
        log.info("Activation checkpointing: %s.", ", ".join(switched) or "no transformers model trains here, none")
    identity = run_identity(cfg, kind.name, method.name)
    resume_from, resume_step = (resumed.path, resumed.step) if resumed else (None, None)
    if resumed:
        expect_own_files(output_dir)  # its checkpoints and log rows are read back, not replaced
    logged_config = {**OmegaConf.to_container(cfg, resolve=True), "hardware": asdict(hardware)}  # type: ignore[dict-item]
    loggers = build_loggers(output_dir, cfg.logger.wandb, logged_config, identity, resume_step)
    experiment = wandb_run(loggers)  # the W&B run, as Lightning calls it; None without W&B
    try:
        trainer, resumed_from = None, None
        if method.module is not None:  # a method that trains (ShortGPT's removal alone does not)
            trainer, resumed_from = train(cfg, method, kind.datamodule, loggers, resume_from, hardware.precision,
                                          training_settings(cfg), clock, fingerprint)  # fmt: skip
        if trainer is not None and not trainer.is_global_zero:
            log.info("Rank %d is done; rank 0 evaluates, exports and writes the results.", trainer.global_rank)
            results = None
        else:
            results = kind.record(trainer, method, resumed_from, evaluation, hardware, run_link(experiment))
            write_results(output_dir / "results.json", results)  # the scores are safe from here on
            _finish(cfg, kind, results, loggers, experiment, clock, memory_since)
    except BaseException as error:
        finish(experiment, error)
        raise
    finish(experiment)
    return results


def run_kind(cfg: DictConfig, settings: RunSettings) -> RunKind:
    """The run's kind, as ``data.kind`` names it (a task model where the data names none); an unknown one is refused
    in one line."""
    name, runs = run_kind_name(cfg), parts("run")
    if name not in runs:
        raise RunRefused([f"data.kind={name} is no kind of run; the kinds are {', '.join(runs)}."])
    return runs[name](cfg, settings)


def refusal_problems(cfg: DictConfig) -> list[str]:
    """Every problem the run would be refused for before compute (its settings, models and data); none when it would
    start. What a sweep asks of each job before the first one runs (the data it reads is tokenised into the cache, as
    the job itself would)."""
    try:
        run_kind(cfg, checked_settings(cfg)).check()
    except RunRefused as refused:
        return refused.problems
    return []


def _check(kind: RunKind, problems: list[str]) -> None:
    """The kind's checks, with ``problems`` found before them (a resume refused) in the same message; raised afresh,
    so the refusal carries no traceback of another."""
    try:
        kind.check()
    except RunRefused as refused:
        if not problems:
            raise
        problems = [*problems, *refused.problems]
    if problems:
        raise RunRefused(problems)


def _prepared_data(kind: RunKind, resumed: ResumePoint | None) -> str | None:
    """The kind's data prepared (which may still refuse the run: what needs data counted only as it is prepared), and
    its fingerprint; a resume onto other data than its checkpoint's refused, by the run and ``--check`` alike."""
    kind.prepare_data()
    fingerprint, data = kind.data_fingerprint() or (None, "")
    if refused := resumed_data_problems(resumed, fingerprint, data):
        raise RunRefused(refused)
    return fingerprint


def _check_precision(resumed: ResumePoint | None, hardware: Hardware) -> None:
    """A resume refused where this machine would train on in another precision than the checkpoint's."""
    problems = precision_problems(resumed, hardware.precision, hardware.precision_requested)
    if problems:
        raise RunRefused(problems)


def untrained_deployment(cfg: DictConfig) -> Deployment:
    """The successor the run's method starts from, untrained, deployed and timed as the run deploys its trained one
    (``deploy``): what a search weighs a shape's time by before any trial trains, since untrained weights take a
    trained model's time. Trains nothing: where the predecessor is still to be made, a model of its shapes stands in,
    as for ``--check``. Refused as the run would be, before any export."""
    settings = checked_settings(cfg)
    kind = run_kind(cfg, settings)
    _check(kind, [])
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    pl.seed_everything(cfg.seed, workers=True)
    kind.prepare_data()
    kind.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="theseus-pl-untrained-", dir=kind.cache_dir) as folder:
        kind.stand_in_predecessor(Path(folder), evaluation_settings(cfg.trainer, "32-true"))
        method = settings.method.build(kind.method_inputs(OmegaConf.to_container(cfg.optimizer, resolve=True)))
        return kind.untrained_deployment(method, Path(folder) / "successor")


def plan(cfg: DictConfig) -> list[str]:
    """What the run would do, in lines, once every check it makes before compute has passed (``--check``);
    :class:`~theseus_pl.app.checks.refused.RunRefused` otherwise. It reads configs and data (tokenised into the cache,
    as the run would) and trains nothing; a decoder LM given as a GGUF file is converted once, as the run would."""
    settings = checked_settings(cfg)
    output_dir = Path(cfg.paths.output_dir)
    resumed, resume_refusals = resume_problems(output_dir, cfg)
    kind = run_kind(cfg, settings)
    _check(kind, resume_refusals + finished_run_problems(output_dir, cfg))
    _prepared_data(kind, None if _holds_finished_run(output_dir, cfg.resume) else resumed)  # the run returns it
    method, theseus, schedule = settings.method, settings.theseus, settings.schedule
    assert method is not None and theseus is not None and schedule is not None  # the checks passed
    steps = total_steps(cfg, None) if method.trains else 0
    hardware = run_hardware(cfg.trainer, kind.cache_dir, output_dir)
    _check_precision(resumed, hardware)
    world_size = planned_trainer(cfg, hardware.precision).world_size
    return [
        f"kind: {kind.description}",
        *kind.plan(steps, world_size, hardware.precision),
        f"method: {method.name}, {theseus.successor_layers} layers kept"
        + ("" if method.trains else ", trains nothing"),
        *([f"loss: {method.loss_in_words(kind.loss)}"] if isinstance(method, SoftTargets) and method.trains else []),
        f"schedule: {schedule.describe() if method.needs_schedule else 'none (the method replaces no modules)'}",
        f"precision: {hardware.precision} ({hardware.precision_reason})",
        *(
            projected_time(cfg, kind, steps, hardware.precision, resumed.step if resumed else 0)
            if method.trains and cfg.check_steps
            else []
        ),
        *([f"deployment: {settings.deploy.in_words()}"] if settings.deploy and wanted(cfg.deploy) else []),
        _outputs_line(output_dir, cfg.resume, resumed),
    ]


def _outputs_line(output_dir: Path, resume: bool | str, resumed: ResumePoint | None) -> str:
    """Where the run would write, and what it would make of what the folder holds already."""
    if _holds_finished_run(output_dir, resume):
        return (
            f"outputs: {output_dir} holds a finished run, which the run would leave as it is (resume=force redoes it)"
        )
    if (output_dir / "results.json").is_file():  # resume=force
        return (
            f"outputs: {output_dir} holds a finished run, which resume=force redoes: its results, checkpoints and "
            "successor go as the run starts"
        )
    if resumed is not None:
        return f"outputs: {output_dir}, resuming from step {resumed.step} ({resumed.path})"
    return f"outputs: would be written to {output_dir}"


def _holds_finished_run(output_dir: Path, resume: bool | str) -> bool:
    """Whether the run would leave ``output_dir`` as it is: a finished run there, not to be redone."""
    return (output_dir / "results.json").is_file() and resume != "force"


def _finish(
    cfg: DictConfig,
    kind: RunKind,
    results: RunRecord,
    loggers: list[Logger],
    experiment: object | None,
    clock: RunClock,
    memory_since: str,
) -> None:
    """The optional steps, the summary row, W&B; ``results.json`` rewritten as they finish.

    An optional step that fails (speed, deployment, model card, logging the summary) is named under
    ``failed_steps`` in ``results.json`` with its error, and the scores stay on disk.
    """
    output_dir = Path(cfg.paths.output_dir)
    results_path = output_dir / "results.json"
    for step, action in kind.optional_steps(results):
        optional_step(results, step, action)
    results.wall_seconds = clock.seconds()
    results.peak_memory = peak_memory(memory_since)
    optional_step(results, "csv_summary", lambda: log_summary_row(loggers, results, results.steps))
    write_results(results_path, results)  # the copy the W&B run keeps is the finished record
    if experiment is not None and optional_step(results, "wandb", lambda: kind.publish(experiment, results,
                                                                                       results_path)):  # fmt: skip
        write_results(results_path, results)
    if not cfg.checkpoint.keep:
        shutil.rmtree(output_dir / "checkpoints", ignore_errors=True)
