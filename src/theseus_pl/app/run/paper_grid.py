"""The paper's Table 2 runs on one machine: for each task, Theseus on the paper's grid and the baselines at the same
steps and seeds, as Hydra multiruns whose jobs share the machine through Hydra's joblib launcher.

Two multiruns a task, run side by side: Theseus (the curriculum, ``optimizer.lr`` x ``replacement.b`` x
``schedule_steps``) and the baselines (fine-tuning and vanilla KD of the truncated predecessor, from its bottom
layers as the paper does and from every other layer, Sajjad et al.'s stronger start, x ``optimizer.lr`` x
``schedule_steps``). Every run trains twice its replacing steps (the paper's successor fine-tuning after p reaches
1; the baselines the same number of steps). The first job of a task fine-tunes the predecessor (the paper's batch
32, lr 2e-5, 4 epochs); the others wait for it and share it (the cache's lock).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import yaml

from theseus_pl.app.config.command_line import override_key
from theseus_pl.data.tasks import GLUE_TASKS, is_glue_task

log = logging.getLogger(__name__)


def paper_experiment(task: str) -> str:
    """The GLUE task's paper experiment, ``+experiment=<task>_curriculum`` (STS-B: ``stsb_curriculum``); a
    ValueError naming the tasks that have one where there is none."""
    experiments = files("theseus_pl.conf") / "experiment"

    def name(glue: str) -> str:
        return f"{glue.lower().replace('-', '')}_curriculum"

    if not is_glue_task(task) or not (experiments / f"{name(task)}.yaml").is_file():
        known = [glue for glue in GLUE_TASKS if (experiments / f"{name(glue)}.yaml").is_file()]
        raise ValueError(f"No paper experiment for {task}: the tasks are {', '.join(known)}.")
    return name(task)


@dataclass(frozen=True)
class Grid:
    """The values each multirun sweeps; the paper's, or a part of it."""

    lr: tuple[str, ...]
    b: tuple[str, ...]
    steps_to_full: tuple[str, ...]


def paper_grid() -> Grid:
    """The paper's grid as ``+sweep=paper_grid`` states it (conf/sweep/paper_grid.yaml: one place for its values)."""
    sweep = yaml.safe_load((files("theseus_pl.conf") / "sweep" / "paper_grid.yaml").read_text())
    params = {key: tuple(str(values).split(",")) for key, values in sweep["hydra"]["sweeper"]["params"].items()}
    return Grid(lr=params["optimizer.lr"], b=params["replacement.b"], steps_to_full=params["replacement.steps_to_full"])


def grid_named(name: str) -> Grid:
    """``paper``: the whole grid; ``first``: its point of the highest learning rate and b at the fewest steps, the
    one a first table is made of (5 runs a task and seed: seed 1 of three tasks took under 7 minutes of one H100)."""
    grid = paper_grid()
    if name == "paper":
        return grid
    return Grid(lr=grid.lr[-1:], b=grid.b[-1:], steps_to_full=grid.steps_to_full[:1])


GRIDS = ("paper", "first")
BASELINES = ("fine_tuning", "kd")
BASELINE_INITS = ("bottom", "every_other")  # the paper's start, and Sajjad et al.'s
MAX_STEPS = "trainer.max_steps='${mul:2,${schedule_steps}}'"  # quoted: Hydra keeps the interpolation
# The settings each multirun's command sets after the user's overrides, so that Hydra, keeping the last value, would
# drop the user's: each by the option that chooses it. (The grid's seeds, rates and budgets come before the
# overrides: an override of one sets it for every job, as the miniature grid sets its learning rate.)
GRID_SETTINGS = {
    "method": "--baselines", "replacement": "--grid", "replacement.b": "--grid", "theseus.init": "--baseline-inits",
    "hydra.launcher.n_jobs": "--jobs", "hydra.sweep.dir": "--output",
}  # fmt: skip


def multirun_commands(
    model: Path,
    glue_dir: Path,
    output: Path,
    tasks: Sequence[str],
    seeds: Sequence[int],
    grid: Grid,
    jobs: int,
    overrides: Sequence[str] = (),
    successor_layers: int = 6,
    baseline_inits: Sequence[str] = BASELINE_INITS,
    baseline_methods: Sequence[str] = BASELINES,
) -> dict[str, list[str]]:
    """Each multirun's command line, by the folder its jobs write (``<output>/<task>/theseus`` and ``…/baselines``);
    ``jobs`` is shared between them by how many runs each holds (at least one each, at most ``jobs`` in all).
    ``baseline_inits`` are the baselines' starts; none: Theseus alone (a budget that the every-other start, say, would
    not fit).
    ``baseline_methods`` are the methods Theseus is set against (at least one): fine-tuning alone halves the
    baselines' GPU time where KD's rows are known already."""
    choices = (("baseline start", baseline_inits, BASELINE_INITS), ("baseline", baseline_methods, BASELINES))
    for name, given, known in choices:
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"No {name} {', '.join(unknown)}: the {name}s are {', '.join(known)}.")
    if not baseline_methods:
        raise ValueError(f"No baseline given: the baselines are {', '.join(BASELINES)} (no start: Theseus alone).")
    keys = [override_key(override) for override in overrides]
    if taken := [f"{key} (choose it with {GRID_SETTINGS[key]})" for key in keys if key in GRID_SETTINGS]:
        raise ValueError(f"The grid sets {'; '.join(taken)}: an override of it would be dropped, so it is refused.")
    experiments = {task: paper_experiment(task) for task in tasks}
    runs = len(grid.lr) * len(grid.steps_to_full) * len(seeds)
    theseus_runs, baseline_runs = runs * len(grid.b), runs * len(baseline_methods) * len(baseline_inits)
    counts = [count for _ in tasks for count in (theseus_runs, *([baseline_runs] if baseline_inits else []))]
    shares = iter(shared_jobs(counts, jobs))  # each task's Theseus multirun's, then its baselines'
    commands = {}
    for task in tasks:
        theseus_jobs = next(shares)
        baseline_jobs = next(shares) if baseline_inits else 0
        common = [
            sys.executable, "-m", "theseus_pl", "-m", f"+experiment={experiments[task]}", f"model.base={model}",
            f"data.glue_dir={glue_dir}", f"theseus.successor_layers={successor_layers}", "logger=csv", "threads=1",
            "benchmark.repeats=0", "hydra/launcher=local_parallel", f"seed={_values(seeds)}",
            f"optimizer.lr={_values(grid.lr)}", f"schedule_steps={_values(grid.steps_to_full)}", MAX_STEPS, *overrides,
        ]  # fmt: skip
        theseus, baselines = output / task / "theseus", output / task / "baselines"
        commands[str(theseus)] = [
            *common, "method=theseus", "replacement=curriculum", f"replacement.b={_values(grid.b)}",
            f"hydra.launcher.n_jobs={theseus_jobs}", f"hydra.sweep.dir={theseus}",
        ]  # fmt: skip
        if baseline_inits:
            commands[str(baselines)] = [
                *common, f"method={_values(baseline_methods)}", f"theseus.init={_values(baseline_inits)}",
                f"hydra.launcher.n_jobs={baseline_jobs}", f"hydra.sweep.dir={baselines}",
            ]  # fmt: skip
    return commands


def shared_jobs(counts: Sequence[int], jobs: int) -> list[int]:
    """``jobs`` jobs at once shared between multiruns of ``counts`` runs each, run side by side: in proportion to
    their runs, at least one each and never more than its runs, so that together they run at most ``jobs`` at once
    (each multirun's launcher keeps its own count: rounded shares ran more than asked). A ValueError where ``jobs`` is
    fewer than the multiruns."""
    if jobs < len(counts):
        raise ValueError(
            f"--jobs {jobs} is fewer than the {len(counts)} multiruns run side by side (Theseus and the baselines of "
            f"each task), each running at least one job at once: give --jobs {len(counts)} or more, or fewer --tasks."
        )
    shares = [1] * len(counts)
    for _ in range(min(jobs, sum(counts)) - len(counts)):  # each next job to the multirun with most runs a job
        growing = [index for index, count in enumerate(counts) if shares[index] < count]
        shares[max(growing, key=lambda index: counts[index] / shares[index])] += 1
    return shares


def _values(values: Sequence[object]) -> str:
    """A sweep's values as Hydra's command line takes them: ``1e-5,2e-5``."""
    return ",".join(map(str, values))


def run_side_by_side(commands: dict[str, list[str]], deadline_s: float | None) -> dict[str, int | None]:
    """Run every multirun at once, each logging to ``<its folder>.log``; stop those still running at the deadline
    (their finished jobs keep their results). Each one's exit status, None where it was stopped."""
    processes = {}
    for folder, command in commands.items():
        Path(folder).parent.mkdir(parents=True, exist_ok=True)
        with Path(f"{folder}.log").open("w") as log_file:  # the child keeps its own copy of the descriptor
            processes[folder] = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                                 start_new_session=True)  # fmt: skip
        log.info("Started %s", folder)
    started, statuses = time.monotonic(), {}
    while len(statuses) < len(processes):
        for folder, process in processes.items():
            if folder not in statuses and process.poll() is not None:
                statuses[folder] = process.returncode
                log.info("%s ended with status %d after %.0f s", folder, process.returncode, time.monotonic() - started)
        if deadline_s is not None and time.monotonic() - started > deadline_s:
            running = {folder: process for folder, process in processes.items() if folder not in statuses}
            _stop(running)
            statuses |= dict.fromkeys(running)
            log.warning("Stopped %s at the deadline (%.0f s)", ", ".join(running), deadline_s)
        if len(statuses) < len(processes):
            time.sleep(1)
    return statuses


STOP_GRACE_S = 30.0  # Lightning saves nothing on SIGTERM, so more would only eat into a node's lease


def _stop(running: dict[str, subprocess.Popen]) -> None:
    """Stop the multiruns at once, each with its launcher's workers (its process group): SIGTERM, then SIGKILL to
    what is left of each group after :data:`STOP_GRACE_S`. The launcher dies at SIGTERM while a job stuck in a CUDA
    call or a data loader's worker may outlive it: waiting on the launcher alone left such a job holding the GPU."""
    for process in running.values():
        os.killpg(process.pid, signal.SIGTERM)
    grace_ends = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < grace_ends and any(_group_alive(process) for process in running.values()):
        time.sleep(0.2)
    for folder, process in running.items():
        if _group_alive(process):
            with contextlib.suppress(ProcessLookupError):  # gone since
                os.killpg(process.pid, signal.SIGKILL)
            log.warning("%s: what still ran %g s after SIGTERM was killed", folder, STOP_GRACE_S)
        process.wait()


def _group_alive(process: subprocess.Popen) -> bool:
    """Whether any process of ``process``'s group still runs (the launcher reaped first where it ended: an unreaped
    one keeps its group)."""
    process.poll()
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True
