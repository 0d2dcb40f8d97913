"""What ``python -m theseus_pl`` can tell is wrong with its command line before Hydra composes anything.

Hydra names a missing config group option (``+experiment=dmeo``) by its path and lists every option; a mistyped
name deserves the nearest ones. Its override grammar rejects an unquoted ``~`` with a lexer error that names no fix.
Both are found here, all at once, with nothing imported but the standard library.
"""

from __future__ import annotations

import difflib
import importlib.resources
from pathlib import Path

VERBOSE_FLAG = "--verbose"  # every log line, warning and progress bar, and a full traceback on errors


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
        key, equals, value = argument.partition("=")
        group = key.lstrip("+~")
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
