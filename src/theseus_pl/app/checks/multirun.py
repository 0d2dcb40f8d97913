"""A multirun's jobs checked before its first job starts, each as the run itself checks it.

Hydra's basic sweeper makes one job per combination of the sweep's values: those on the command line
(``optimizer.lr=1e-4,2e-4``) and those a sweep config sets in ``hydra.sweeper.params`` (``+sweep=lm_protocol``),
the command line's winning for the same key. Each job's config is composed here as the job will compose it, and
checked by :func:`~theseus_pl.app.checks.settings.checked_settings` and, where its settings pass, by the run's own
checks of its models and data (the predecessor's config against the successor's depth, the files); a refusal names
the job by its overrides, so a sweep with one bad job stops before any job runs instead of at that job. The jobs are
listed and numbered as ``BasicSweeper.split_arguments`` does (one list of values per key, at the key's first
position, their product); that method lives in ``hydra._internal``, so its few lines are mirrored here on Hydra's
public override parser rather than called.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from theseus_pl.app.checks.resume import SWEEP_ELSEWHERE, finished_run_problems, resume_problems
from theseus_pl.app.checks.settings import checked_settings

log = logging.getLogger(__name__)

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"  # the sweeper whose jobs this can list
CONFIG = ("theseus_pl.conf", "train")


def multirun_jobs(overrides: Sequence[str]) -> list[list[str]] | None:
    """Each job's overrides, as the basic sweeper makes them; None where they cannot be listed here (another
    sweeper, such as Optuna's, chooses its jobs as it goes)."""
    return _jobs_of(overrides, _sweep_hydra(overrides))


def _sweep_hydra(overrides: Sequence[str]) -> DictConfig:
    """The sweep's Hydra config, composed with the command line's overrides but its sweeps."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    fixed = [override.input_line for override in parsed if not override.is_sweep_override()]
    with initialize_config_module(CONFIG[0], version_base="1.3"):
        return compose(CONFIG[1], overrides=fixed, return_hydra_config=True).hydra


def _jobs_of(overrides: Sequence[str], hydra: DictConfig) -> list[list[str]] | None:
    """:func:`multirun_jobs` from the sweep's composed ``hydra`` config."""
    parser = OverridesParser.create()
    parsed = parser.parse_overrides(list(overrides))
    if hydra.sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    params = hydra.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
    by_key = {o.get_key_element(): o for o in parser.parse_overrides([f"{k}={v}" for k, v in params.items()])}
    by_key.update({override.get_key_element(): override for override in parsed})  # the command line wins
    choices = [
        [f"{key}={value}" for value in override.sweep_string_iterator()]
        if override.is_sweep_override()
        else [override.input_line]
        for key, override in by_key.items()
    ]
    return [list(job) for job in itertools.product(*choices)]


def multirun_refusals(
    overrides: Sequence[str],
    job_problems: Callable[[DictConfig], list[str]] | None = None,
    each_value_once: bool = False,
) -> list[str]:
    """``job i (overrides): problem`` for every problem of every job the sweep would run (``every job: problem``
    where all of several share it); none when every job's settings pass (or the jobs cannot be listed here).
    ``job_problems``: what else refuses a job whose settings pass (the run's own checks of its models and data, which
    this floor cannot import). ``each_value_once``: check only the jobs that first hold each swept value (as many as
    the values, not their product: a grid of hundreds of jobs composed in seconds), so a problem of one value is
    found and one of a combination of values may not be."""
    try:
        hydra = _sweep_hydra(overrides)
        jobs = _jobs_of(overrides, hydra)
    except (HydraException, ValueError) as error:  # the sweep itself is malformed: Hydra says so when it starts
        log.debug("Could not list the sweep's jobs (%s); each job checks itself.", error)
        return []
    jobs = jobs or []
    checked = _first_of_each_value(jobs) if each_value_once else range(len(jobs))
    return job_refusals(jobs, checked, overrides, job_problems, sweep_folder=_sweep_folder(hydra.sweep))


def job_refusals(
    jobs: Sequence[Sequence[str]],
    checked: Sequence[int],
    overrides: Sequence[str],
    job_problems: Callable[[DictConfig], list[str]] | None = None,
    noun: str = "job",
    sweep_folder: Path | None = None,
) -> list[str]:
    """The problems of the ``checked`` jobs of ``jobs`` (each its whole overrides), each job named by what it adds
    to the command line's ``overrides`` (``noun``: what a job is to the sweep's users); a problem of every job (of
    several) said once. With the ``sweep_folder`` (each job's folder its number in it), also what a checked job's
    folder holds: a finished run or a checkpoint of other settings, which refused that job as it started, after the
    jobs before it had run (and ``--check`` had passed the sweep)."""
    by_problem: dict[str, list[str]] = {}
    with initialize_config_module(CONFIG[0], version_base="1.3"):
        for number in checked:
            cfg = compose(CONFIG[1], overrides=[*jobs[number], "paths.output_dir=unused"])
            swept = " ".join(override for override in jobs[number] if override not in overrides)  # what varies
            problems = checked_settings(cfg).problems
            if not problems and job_problems is not None:
                problems = job_problems(cfg)
            if not problems and sweep_folder is not None:
                problems = _folder_problems(sweep_folder / str(number), cfg)
            for problem in dict.fromkeys(problems):  # once a job, as a job is counted once
                by_problem.setdefault(problem, []).append(f"{noun} {number} ({swept or 'as given'})")
    lines = []
    for problem, names in by_problem.items():
        if len(checked) == 1 or len(names) < len(checked):
            lines += [f"{name}: {problem}" for name in names]
        elif len(checked) == len(jobs):
            lines.append(f"every {noun}: {problem}")
        else:
            lines.append(f"all {len(checked)} {noun}s checked (one for each swept value): {problem}")
    return lines


def _sweep_folder(sweep: DictConfig) -> Path | None:
    """The folder a sweep's jobs are made in (its ``hydra.sweep``), each its job number there (Hydra's
    ``hydra.sweep.subdir`` as this project sets it); None where the command names them otherwise."""
    written = OmegaConf.to_container(sweep, resolve=False)
    # the job's name and Hydra's runtime values are the job's own, only known as it runs
    if written.get("subdir") != "${hydra.job.num}" or "${hydra" in str(written.get("dir")):
        return None
    try:
        return Path(sweep.dir)
    except (HydraException, OmegaConfBaseException) as error:
        log.debug("The sweep's folder is not known before it runs (%s): its jobs' folders are not read.", error)
        return None


def _folder_problems(folder: Path, cfg: DictConfig) -> list[str]:
    """What the job's folder holds that refuses the job: a finished run of other settings, or a checkpoint to resume
    that was trained with others."""
    if not folder.is_dir():
        return []
    _, resume_refusals = resume_problems(folder, cfg, SWEEP_ELSEWHERE)
    return finished_run_problems(folder, cfg, elsewhere=SWEEP_ELSEWHERE) + resume_refusals


def _first_of_each_value(jobs: list[list[str]]) -> list[int]:
    """The numbers of the jobs that first hold one of the sweep's values (``seed=2``, ``optimizer.lr=1e-5``)."""
    seen: set[str] = set()
    firsts = []
    for number, job in enumerate(jobs):
        if not seen.issuperset(job):
            firsts.append(number)
            seen.update(job)
    return firsts
