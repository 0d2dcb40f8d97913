"""``python -m theseus_pl +experiment=rte_curriculum [overrides]``: compress a fine-tuned model end to end (an encoder
on a task, or a decoder LM on text: ``+experiment=smollm2_quick``). With ``--check``, only the checks a run makes
before compute, and the plan of what it would do."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from theseus_pl.app.config.command_line import (
    VERBOSE_FLAG,
    check_group_options,
    check_launcher_plugin,
    is_multirun,
    output_dir_as_run_dir,
    override_key,
    refuse_home_shorthand,
    run_folder_problems,
)
from theseus_pl.app.config.composition import composition_problems
from theseus_pl.app.config.resolvers import register_resolvers, resolution_problem
from theseus_pl.app.config.run_folder import made_by_this_command, record_command

log = logging.getLogger("theseus_pl")
CHECK_FLAG = "--check"
check_only = False  # set by --check: main() prints the run's plan instead of running it

register_resolvers()


@hydra.main(version_base="1.3", config_path="pkg://theseus_pl.conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    """Run the pipeline and print the headline; the return value serves sweepers. A refused run prints its problems
    alone, leaves no run folder behind and exits with status 2; a run whose training diverged, or stopped below
    its score (``callbacks.stop_below``), says so alone and exits with status 1."""
    from theseus_pl.app.checks.refused import RunRefused
    from theseus_pl.app.run.pipeline import plan, run  # torch, Lightning: not needed to refuse a bad command line
    from theseus_pl.app.tracking.console import configure_console
    from theseus_pl.lightning.callbacks import TrainingEnded
    from theseus_pl.lightning.quiet import verbose

    configure_console(verbose())
    output_dir = Path(cfg.paths.output_dir)
    fresh = made_by_this_command(output_dir)  # made by Hydra for this job: a refusal removes it
    try:
        log.debug("Composed config:\n%s", OmegaConf.to_yaml(cfg, resolve=True))
    except InterpolationResolutionError as error:  # a resolver's refusal: a packaged model's wheels not installed
        _refuse(RunRefused([resolution_problem(error)]), output_dir if fresh else None)
    try:
        if check_only:
            lines = plan(cfg)
        else:
            results = run(cfg)
    except RunRefused as refused:  # refused before the run writes anything
        if HydraConfig.get().mode == RunMode.MULTIRUN and not check_only:
            # A sweep's jobs are checked before its first (checks.multirun); a search draws its trials as it goes,
            # and a combination no check foresaw fails its trial alone: Hydra records the job as failed.
            if fresh:
                _remove_run_folder(output_dir)
            raise
        _refuse(refused, output_dir if fresh else None)
    except TrainingEnded as ended:  # diverged, or stopped below its score: its folder and log stay, no results.json
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # Hydra records this job as failed (a search: pruned); the sweep's other jobs run
        print(ended, file=sys.stderr)
        raise SystemExit(1) from None
    except BaseException:
        if check_only and fresh:  # --check leaves no folder behind, even where it fails unforeseen
            _remove_run_folder(output_dir)
        raise
    if check_only:
        if fresh:
            _remove_run_folder(output_dir)
        print("The run passes every check before compute (nothing was trained, no run folder was made). It would run:")
        print("\n".join(f"  {line}" for line in lines))
        raise SystemExit(0)  # before Hydra's end of job, which would write into the run folder again
    if results is None:  # a DDP rank other than 0: rank 0 reports
        return None
    if results.resumed_from and HydraConfig.get().output_subdir is None:  # resumed: Hydra recorded nothing
        record_command(cfg, output_dir)
    log.info("%s; results in %s", results.headline(), cfg.paths.output_dir)
    for step, error in results.failed_steps.items():
        log.warning("Step %r did not complete: %s", step, error)
    return results.objective()


def _refuse(refused: Exception, fresh_folder: Path | None) -> NoReturn:
    """Print the refusal alone, remove the folder Hydra made for this job (None: a folder resumed into stays) and
    exit with status 2."""
    if fresh_folder is not None:
        _remove_run_folder(fresh_folder)
    print(refused, file=sys.stderr)
    raise SystemExit(2) from None


def _remove_run_folder(folder: Path) -> None:
    """A refused run's folder, and the folders above it that Hydra made for it and that are now empty
    (``outputs/<task>/``), up to the working directory."""
    shutil.rmtree(folder)
    here = Path.cwd().resolve()
    for parent in folder.resolve().parents:
        if parent == here or here not in parent.parents or any(parent.iterdir()):
            break
        parent.rmdir()


def _writing_nothing(arguments: list[str]) -> list[str]:
    """The overrides that keep Hydra from writing into the run folder for ``--check``: no ``.hydra/`` record and no
    log file (the console keeps every line). Into a folder that holds anything, ``--check`` then writes nothing; one
    Hydra made for it is removed. The log file is left as it is where the command chooses its own job logging."""
    own_logging = any(
        override_key(argument).startswith(("hydra/job_logging", "hydra.job_logging")) for argument in arguments
    )
    logging_file = (
        [] if own_logging else ["~hydra.job_logging.handlers.file", "hydra.job_logging.root.handlers=[console]"]
    )
    return ["hydra.output_subdir=null", *logging_file]


def cli() -> None:
    """``python -m theseus_pl`` and the ``theseus-pl`` command."""
    arguments = sys.argv[1:]
    if VERBOSE_FLAG in arguments:
        sys.argv.remove(VERBOSE_FLAG)
        os.environ.update(THESEUS_PL_VERBOSE="1", HYDRA_FULL_ERROR="1")
    problems = refuse_home_shorthand(arguments) + check_group_options(arguments) + check_launcher_plugin(arguments)
    problems += run_folder_problems(arguments, multirun=is_multirun(arguments))
    if not problems:  # Hydra's own refusals of what it composes, where the group options are there
        problems = composition_problems(arguments)
    if problems:
        print("The command line cannot be read:\n" + "\n".join(f"- {p}" for p in problems), file=sys.stderr)
        raise SystemExit(2)
    sys.argv[1:] = arguments = output_dir_as_run_dir(sys.argv[1:])  # the run's one folder: Hydra's run folder
    global check_only
    check_only = CHECK_FLAG in arguments
    if check_only:
        sys.argv.remove(CHECK_FLAG)
        arguments.remove(CHECK_FLAG)
        sys.argv += _writing_nothing(arguments)
    if is_multirun(arguments):  # -m, or hydra.mode=MULTIRUN
        from theseus_pl.app.checks.multirun import multirun_jobs, multirun_refusals  # torch, Lightning: multirun only
        from theseus_pl.app.run.pipeline import refusal_problems
        from theseus_pl.app.search.checks import search_refusals

        overrides = [argument for argument in arguments if not argument.startswith("-")]
        refusals = search_refusals(overrides, refusal_problems)  # None: not a search, a sweep of listed jobs
        searching = refusals is not None
        if refusals is None:
            refusals = multirun_refusals(overrides, refusal_problems)
        if refusals:
            print("The sweep cannot start (no job was run); these jobs would be refused:\n"
                  + "\n".join(f"- {refusal}" for refusal in refusals), file=sys.stderr)  # fmt: skip
            raise SystemExit(2)
        if check_only:
            if searching:
                count = "a search: its trials are drawn as it runs, every value of its space was checked"
            else:
                jobs = multirun_jobs(overrides)
                count = "its jobs cannot be listed before it starts" if jobs is None else f"{len(jobs)} jobs"
            print(f"The sweep passes every job's checks of its settings, models and data ({count}; nothing was "
                  "run).")  # fmt: skip
            return
    main()


if __name__ == "__main__":
    cli()
