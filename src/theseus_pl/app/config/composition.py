"""What Hydra would refuse as it composes a single run's config, said in one line each with its fix.

Hydra reports an override it cannot read or apply in its own words and exits with status 1: a key the config does
not have (``trainer.max_step=6``: "Could not override ... To append to your config use +trainer.max_step=6", which
advises adding a key nothing reads), a value its grammar cannot read (an unquoted ``data.task=ñø☃``), two
``+experiment=``. Composed here first, with Hydra's own compose API, each becomes one line of the command line's
refusal (exit status 2), the nearest setting named where a key is mistyped. A sweep's overrides are left to the
sweep's own check of each job (:mod:`theseus_pl.app.checks.multirun`); Hydra's own (``hydra.*``) to Hydra.
"""

from __future__ import annotations

import difflib

from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from theseus_pl.app.config.command_line import override_key

CONFIG_MODULE, CONFIG_NAME = "theseus_pl.conf", "train"
OTHER_CONFIG = {"-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir"}


def composition_problems(arguments: list[str]) -> list[str]:
    """The problems Hydra would end the command on (none for a sweep, whose jobs are checked one by one)."""
    if OTHER_CONFIG & set(arguments):  # another config than the app's: Hydra's to compose
        return []
    overrides = [a for a in arguments if _is_override(a) and not _hydra_own(a)]
    parser = OverridesParser.create()
    unreadable, parsed = [], []
    for argument in overrides:
        try:
            parsed.append(parser.parse_override(argument))
        except HydraException:  # OverrideParseException, or a lexer's "token recognition error"
            key, _, value = argument.partition("=")
            unreadable.append(
                f"{argument}: Hydra's override grammar cannot read the value. Quote it, as the shell passes it on: "
                f"'{key}=\"{value}\"'."
            )
    if unreadable or any(override.is_sweep_override() for override in parsed):
        return unreadable
    try:
        composed(overrides)
    except ConfigCompositionException as error:
        return [_composition_problem(error, overrides)]
    return []


def composed(overrides: list[str]) -> DictConfig:
    """The run's config as ``python -m theseus_pl <overrides>`` composes it (unresolved)."""
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        return compose(CONFIG_NAME, overrides=overrides)


def _composition_problem(error: ConfigCompositionException, overrides: list[str]) -> str:
    key = getattr(error.__cause__, "full_key", None)
    first_line = str(error).splitlines()[0]
    if not key:  # two +experiment=, ...: Hydra's first line says which
        return f"Hydra cannot compose the config: {first_line}"
    argument = next((o for o in overrides if override_key(o) == key), key)
    parent, _, name = key.rpartition(".")
    try:
        config = composed([o for o in overrides if o != argument])
        keys = (OmegaConf.select(config, parent) if parent else config) or {}
        siblings = [str(k) for k in keys if not str(k).startswith("_")]  # _target_: no setting
    except (ConfigCompositionException, OmegaConfBaseException):
        siblings = []
    near = difflib.get_close_matches(name, siblings, n=2)
    if near:
        hint = f"did you mean {' or '.join(f'{parent}.{n}' if parent else n for n in near)}?"
    elif siblings:
        hint = f"its settings are {', '.join(siblings)}."
    else:
        hint = "check its name in the docs' configuration page."
    return f"{argument}: the config has no {key}; {hint}"


def _is_override(argument: str) -> bool:
    """``key=value`` or ``~key``; not a flag, nor a flag's value (``--cfg job``)."""
    return ("=" in argument or argument.startswith("~")) and not argument.startswith("-")


def _hydra_own(argument: str) -> bool:
    return override_key(argument).startswith(("hydra.", "hydra/"))
