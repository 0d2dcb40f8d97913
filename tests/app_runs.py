"""The app's config as the command line composes it, and the overrides of a whole run in seconds."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from theseus_pl.app.config.resolvers import register_resolvers

register_resolvers()  # the app's ${package_path:...}, ${mul:...} in composed configs


def compose_config(*overrides: str) -> DictConfig:
    """The app's config as ``python -m theseus_pl <overrides>`` composes it (output folder left to the caller)."""
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        return compose("train", overrides=["paths.output_dir=unused", *overrides])


def tiny_run_overrides(tiny_base: Path, glue_dir: Path, tmp_path: Path, output: str = "run") -> list[str]:
    """A whole app run in seconds: tiny model, tiny RTE, 6 steps, CSV log only."""
    return [
        f"model.base={tiny_base}", f"data.glue_dir={glue_dir}", "data.task=RTE", "data.batch_size=4",
        "theseus.successor_layers=2", "finetune.epochs=1", "schedule_steps=3", "trainer=cpu", "trainer.max_steps=6",
        "trainer.val_check_interval=2", "trainer.log_every_n_steps=1", "logger=csv", "optimizer.lr=1e-3",
        "benchmark.repeats=1",
        f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / output}",
    ]  # fmt: skip


@dataclass
class Completed:
    """What a command line ended with, as :class:`subprocess.CompletedProcess` holds it."""

    returncode: int
    stdout: str
    stderr: str


def in_process(cli: Callable[[], object], program: str, *arguments: str, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> Completed:  # fmt: skip
    """``program arguments`` run by its entry point ``cli`` in this process, as a user's shell would run it (in
    ``cwd``, with ``env`` added), its exit status and what it printed returned: a process's start (importing
    torch, transformers, Lightning and Hydra, seconds each time) saved. What the command changes in this process
    is put back (the working folder, the environment, the loggers, warnings, Hydra's global state, torch's thread
    count), so the next test starts as it would have. Hydra configures the job's logging with
    ``logging.config.dictConfig``, which closes every handler there is, pytest's own among them (each later test
    would fail as it starts): those are kept open while the command runs, and the handlers it made are closed after
    it. The real entry points keep tests of their own in a process of their own (``tests/test_packaging.py``, the
    ``python -m theseus_pl`` tests of ``tests/app/test_app.py``)."""
    import transformers
    from hydra.core.global_hydra import GlobalHydra

    stdout, stderr = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd, saved_env = sys.argv, os.getcwd(), dict(os.environ)
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict))]
    saved_loggers = [(log, log.handlers[:], log.level, log.propagate, log.disabled) for log in loggers]
    kept_open = {handler for log in loggers for handler in log.handlers}
    for handler in kept_open:
        handler.close = _kept_open  # this instance's, over logging.Handler.close
    bars, threads = transformers.utils.logging.is_progress_bar_enabled(), torch.get_num_threads()
    returncode = 0
    try:
        sys.argv = [program, *arguments]
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings(), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                cli()
            except SystemExit as exited:
                if isinstance(exited.code, str):
                    print(exited.code, file=sys.stderr)
                returncode = exited.code if isinstance(exited.code, int) else int(exited.code is not None)
            except Exception:  # what Python prints for an uncaught exception, and its status
                traceback.print_exc()
                returncode = 1
    finally:
        made = {handler for log in logging.Logger.manager.loggerDict.values() if isinstance(log, logging.Logger)
                for handler in log.handlers} | set(logging.getLogger().handlers)  # fmt: skip
        for handler in kept_open:
            del handler.close
        for handler in made - kept_open:
            handler.close()
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for logger, handlers, level, propagate, disabled in saved_loggers:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate, logger.disabled = propagate, disabled
        for logger in logging.Logger.manager.loggerDict.values():
            if isinstance(logger, logging.Logger) and logger not in loggers:  # made by the command: left quiet
                logger.handlers.clear()
        (transformers.utils.logging.enable_progress_bar if bars else transformers.utils.logging.disable_progress_bar)()
        torch.set_num_threads(threads)
        GlobalHydra.instance().clear()
    return Completed(returncode, stdout.getvalue(), stderr.getvalue())


def _kept_open() -> None:
    """A handler's ``close`` while a command runs in this process: it stays open for the test that holds it."""


def app_command(*arguments: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Completed:
    """``python -m theseus_pl arguments``, in this process (:func:`in_process`)."""
    from theseus_pl.__main__ import cli

    return in_process(cli, "theseus_pl", *arguments, cwd=cwd, env=env)
