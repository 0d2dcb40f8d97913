"""A search's checks before its first trial: its settings, its space, what it needs of every trial's run (an
encoder classifier, deployed and timed at the serving batch size on the dev rows' own lengths), and each value of
its space as a run would check it (every choice and each interval's ends, in every combination where there are few),
so that a depth the predecessor does not have is refused before any training, not at the trial that draws it."""

from __future__ import annotations

import importlib.util
import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hydra import compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from theseus_pl.app.checks.multirun import CONFIG, job_refusals
from theseus_pl.app.config.resolvers import run_kind_name
from theseus_pl.app.results.registry import registered_kinds
from theseus_pl.app.results.search_finding import searchable_kinds
from theseus_pl.app.search.settings import PREFIX, SearchSettings
from theseus_pl.core.settings import SettingsError
from theseus_pl.deployment.record import wanted

if TYPE_CHECKING:  # Optuna only where the command is a search: every other multirun is checked without it
    from theseus_pl.app.search.space import SearchSpace

SEARCH_SWEEPER = "hydra_plugins.theseus_pl_search.search_sweeper.SearchSweeper"
EVERY_COMBINATION = 64  # the most combinations checked one by one (about 0.4 s each on the AVX2-only EPYC)


def search_refusals(
    overrides: Sequence[str], job_problems: Callable[[DictConfig], list[str]] | None = None
) -> list[str] | None:
    """Every problem of the search the command starts; None where its sweeper is not the search (the basic
    sweeper's jobs are checked by ``checks.multirun``). ``job_problems``: the run's own checks of its models and
    data, applied to each value of the space."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException:  # a malformed override: Hydra names it as it starts, as for any command
        return None
    fixed = [override.input_line for override in parsed if not override.is_sweep_override()]
    with initialize_config_module(CONFIG[0], version_base="1.3"):
        composed = compose(CONFIG[1], overrides=[*fixed, "paths.output_dir=unused"], return_hydra_config=True)
    sweeper = composed.hydra.sweeper
    if sweeper.get("_target_") != SEARCH_SWEEPER:
        return None
    if importlib.util.find_spec("optuna") is None:
        return ["+search needs Optuna: pip install 'theseus_pl[search]' (in a checkout: pip install -e '.[search]')."]
    from theseus_pl.app.search.space import search_space

    try:
        settings = SearchSettings.from_config(OmegaConf.to_container(sweeper, resolve=False))  # type: ignore[arg-type]
        space = search_space(settings.params, overrides)
    except SettingsError as error:
        return list(error.problems.values())
    except ValueError as error:
        return [str(error)]
    problems = trial_needs(composed, settings)
    if problems:
        return problems
    if not space.distributions:
        return [f"{PREFIX}params is empty: nothing to search (+search=fastest_within declares a space)."]
    if settings.max_latency_ms is not None:
        from theseus_pl.app.search.front import is_shape_key  # pandas: a search's alone

        intervals = [key for key, values in space.ends().items() if is_shape_key(key) and not space.is_choice(key)]
        if intervals:
            return [f"{PREFIX}max_latency_ms times each shape of the space before training: {key} is searched over "
                    "an interval; give its shapes as choice(...)." for key in intervals]  # fmt: skip
    jobs = probe_jobs(space)
    return job_refusals(jobs, range(len(jobs)), space.fixed, job_problems, noun="combination")


def trial_needs(cfg: DictConfig, settings: SearchSettings) -> list[str]:
    """What every trial's run must be for the search to weigh it."""
    kind, searchable = run_kind_name(cfg), searchable_kinds()
    if kind not in searchable:
        weighed = ", ".join(f"{described} (data.kind={name})" for name, described in searchable.items())
        return [f"data.kind={kind}: the search weighs {weighed} for now; search this kind's settings with a plain "
                "sweep (-m key=a,b)."]  # fmt: skip
    owners = {part.search_option: name for name, part in registered_kinds().items() if part.search_option}
    chosen = OmegaConf.select(cfg, "hydra.runtime.choices.search")  # the +search= option, as Hydra composed it
    if chosen in owners and owners[chosen] != kind:
        own = registered_kinds()[kind].search_option
        instead = f"+search={own}" if own else "a search config of its own (its space in hydra.sweeper.params)"
        return [f"+search={chosen} is written for data.kind={owners[chosen]} runs (its space, their deployment); a "
                f"data.kind={kind} run's search is {instead}."]  # fmt: skip
    problems = []
    if not wanted(cfg.deploy):
        problems.append("deploy.onnx=false: the search times each trial's deployed models; set deploy.onnx=true.")
    if not cfg.deploy.get("own_lengths"):
        problems.append("deploy.own_lengths=false: the search times each trial on the dev rows' own lengths; set "
                        "deploy.own_lengths=true.")  # fmt: skip
    if settings.batch_size not in list(cfg.deploy.batch_sizes):
        problems.append(f"{PREFIX}batch_size={settings.batch_size} is not timed: deploy.batch_sizes="
                        f"{list(cfg.deploy.batch_sizes)} (add it there).")  # fmt: skip
    return problems


def probe_jobs(space: SearchSpace) -> list[list[str]]:
    """Every combination of the space's values (each choice, each interval's ends) where there are at most
    ``EVERY_COMBINATION`` of them, so that two values refused together (``method=kd`` with a narrower feed-forward
    width) are found before any trial; else a job for each value, the other keys at their first value (the first
    choice, the interval's start)."""
    ends = space.ends()
    if math.prod(len(values) for values in ends.values()) <= EVERY_COMBINATION:
        return [space.overrides(dict(zip(ends, values, strict=True))) for values in itertools.product(*ends.values())]
    first = {key: values[0] for key, values in ends.items()}
    jobs = [space.overrides(first)]
    for key, values in ends.items():
        jobs += [space.overrides({**first, key: value}) for value in values[1:]]
    return jobs
