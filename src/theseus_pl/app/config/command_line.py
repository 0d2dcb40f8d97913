"""What ``python -m theseus_pl`` can tell is wrong with its command line before Hydra composes anything.

Hydra names a missing config group option (``+experiment=dmeo``) by its path and lists every option; a mistyped
name deserves the nearest ones. Its override grammar rejects an unquoted ``~`` with a lexer error that names no fix.
A launcher whose Hydra plugin is not installed fails in Hydra as a config it "could not find"
(``hydra/launcher/submitit_slurm``), naming neither the package nor the extra that brings it. The run's folder given
as ``paths.output_dir=DIR`` left Hydra's record and log in a folder of Hydra's own, the results in ``DIR``: it is
given to Hydra as ``hydra.run.dir=DIR``, and refused where it cannot be the one folder. All are found here, at once,
with nothing imported but the standard library.
"""

from __future__ import annotations

import difflib
import importlib.resources
import importlib.util
import os
import re
from pathlib import Path

VERBOSE_FLAG = "--verbose"  # every log line, warning and progress bar, and a full traceback on errors
OUTPUT_DIR, RUN_DIR = "paths.output_dir", "hydra.run.dir"  # the run's folder as the app reads it, and as Hydra makes it
MULTIRUN_FLAGS = ("-m", "--multirun")
# hydra.mode=MULTIRUN, which makes Hydra run a multirun without -m, as Hydra reads its enum RunMode: the member's name,
# its qualified name or its value.
MODE, MULTIRUN_MODES = "hydra.mode", ("MULTIRUN", "RunMode.MULTIRUN", "2")

# What each launcher needs installed: its plugin's package and the modules it imports (the [cluster] extra).
SUBMITIT = ("hydra-submitit-launcher", ("hydra_plugins.hydra_submitit_launcher", "submitit"))
JOBLIB = ("hydra-joblib-launcher", ("hydra_plugins.hydra_joblib_launcher", "joblib"))
LAUNCHER_PLUGINS = {
    "slurm": SUBMITIT, "slurm_local": SUBMITIT, "submitit_slurm": SUBMITIT, "submitit_local": SUBMITIT,
    "local_parallel": JOBLIB, "joblib": JOBLIB,
}  # fmt: skip


def config_folder() -> Path:
    return Path(str(importlib.resources.files("theseus_pl") / "conf"))


def group_options(group: str) -> list[str]:
    """The options of one of the app's config groups (``experiment``, ``sweep``, ``method``, ...)."""
    return sorted(path.stem for path in (config_folder() / group).glob("*.yaml"))


def check_group_options(arguments: list[str]) -> list[str]:
    """Each ``[+]group=option`` naming no option of the app's own config groups, with the nearest names. Sweep
    values (``method=kd,theseus``) are checked one by one; Hydra's own groups and sweep functions are left to it."""
    problems = []
    for argument in arguments:
        _, equals, value = argument.partition("=")
        group = override_key(argument)
        if not equals or argument.startswith("-") or not group.isidentifier():
            continue
        if not (config_folder() / group).is_dir() or any(mark in value for mark in "$()[]{}"):
            continue
        options = group_options(group)
        for option in value.split(","):
            if option in options or option == "null":
                continue
            near = difflib.get_close_matches(option, options, n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(near)}?" if near else f"the options are {', '.join(options)}."
            problems.append(f"{group}={option}: there is no {group} named {option!r}; {hint}")
    return problems


def refuse_home_shorthand(arguments: list[str]) -> list[str]:
    """Hydra's override grammar rejects an unquoted ``~`` with a lexer error that names no fix: name it here."""
    problems = []
    for argument in arguments:
        key, equals, value = argument.partition("=")
        if equals and value.startswith("~"):
            problems.append(
                f"{argument}: Hydra's override grammar does not accept an unquoted ~. Write {key}=$HOME{value[1:]} "
                "(your shell expands $HOME) or give the full path."
            )
    return problems


def is_multirun(arguments: list[str]) -> bool:
    """Whether Hydra runs the command line as a multirun: ``-m`` (``--multirun``), or the last ``hydra.mode`` given
    naming MULTIRUN (Hydra's own way of asking for one; ``-m`` wins over ``hydra.mode=RUN``). Only the flags were
    looked for, so ``hydra.mode=MULTIRUN`` passed ``paths.output_dir`` to every job and skipped the jobs' checks."""
    mode = _given(arguments, MODE)
    return any(argument in MULTIRUN_FLAGS for argument in arguments) or (
        mode is not None and mode.strip("'\"") in MULTIRUN_MODES
    )


def run_folder_problems(arguments: list[str], multirun: bool) -> list[str]:
    """``paths.output_dir=DIR`` where it cannot be the run's one folder: in a multirun (every job would write into
    ``DIR``, Hydra's records into its sweep folder), or beside a ``hydra.run.dir`` naming another folder."""
    output_dir = _given(arguments, OUTPUT_DIR)
    if output_dir is None:
        return []
    if multirun:
        return [
            f"{OUTPUT_DIR}={output_dir}: a multirun's jobs each run in a folder of their own, in the sweep's folder: "
            f"choose that with hydra.sweep.dir={output_dir} (each job's name in it: hydra.sweep.subdir)."
        ]
    run_dir = _given(arguments, RUN_DIR)
    if run_dir is not None and os.path.abspath(run_dir) != os.path.abspath(output_dir):
        return [
            f"{OUTPUT_DIR}={output_dir} and {RUN_DIR}={run_dir} name two run folders: Hydra's record (.hydra/) and "
            f"the log would go to one, the results and the successor to the other. Give one: {RUN_DIR}={output_dir}."
        ]
    return []


def output_dir_as_run_dir(arguments: list[str]) -> list[str]:
    """The command line with ``paths.output_dir=DIR`` given as ``hydra.run.dir=DIR`` (dropped where that is given
    too, naming the same folder): ``paths.output_dir`` is the folder Hydra makes for the run, so its record, its log
    and the results all go there, and a refused run or ``--check`` removes the folder it made. Hydra made its own
    folder otherwise, and kept it."""
    output_dir = _given(arguments, OUTPUT_DIR)
    if output_dir is None:
        return arguments
    kept = [argument for argument in arguments if _key(argument) != OUTPUT_DIR]
    return kept if _given(arguments, RUN_DIR) is not None else [*kept, f"{RUN_DIR}={output_dir}"]


def override_key(argument: str) -> str:
    """The key an override names, without Hydra's ``+``, ``++`` or ``~`` (``++theseus.init=bottom``:
    ``theseus.init``): how the command line, the grid and the search match an override to a setting."""
    return argument.lstrip("+~").partition("=")[0]


def _key(argument: str) -> str | None:
    """The key an override sets (``key=``, ``+key=``, ``++key=``); None for a flag, a deletion or no override."""
    return override_key(argument) if "=" in argument and not argument.startswith(("-", "~")) else None


def _given(arguments: list[str], key: str) -> str | None:
    """The value the command line sets ``key`` to (the last one, which Hydra applies), or None."""
    values = [argument.partition("=")[2] for argument in arguments if _key(argument) == key]
    return values[-1] if values else None


def check_launcher_plugin(arguments: list[str]) -> list[str]:
    """The launcher the command line picks (``hydra/launcher=...``, or its sweep's) when its plugin is missing."""
    launcher, sweep = _chosen_launcher(arguments)
    if launcher not in LAUNCHER_PLUGINS:
        return []
    package, modules = LAUNCHER_PLUGINS[launcher]
    if all(_installed(module) for module in modules):
        return []
    fix = 'pip install "theseus_pl[cluster]"'
    if sweep:
        return [
            f"{sweep} runs its jobs with hydra/launcher={launcher}, which needs {package}, not installed: {fix}, "
            "or add hydra/launcher=basic to run them one after another."
        ]
    return [f"hydra/launcher={launcher} needs {package}, which is not installed: {fix}."]


def _chosen_launcher(arguments: list[str]) -> tuple[str | None, str | None]:
    """The launcher and the ``+sweep=`` argument that picked it (None: the command line's own
    ``hydra/launcher=``, which wins over its sweep's)."""
    picked: tuple[str | None, str | None] = (None, None)
    for argument in arguments:
        key, _, value = argument.partition("=")
        if key.lstrip("+") == "hydra/launcher":
            return value, None
        sweep = config_folder() / "sweep" / f"{value}.yaml"
        if key.lstrip("+") == "sweep" and sweep.is_file():
            found = re.search(r"override /hydra/launcher: *(\w+)", sweep.read_text())
            picked = (found[1], argument) if found else picked
    return picked


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing too (no Hydra plugin installed at all)
        return False
