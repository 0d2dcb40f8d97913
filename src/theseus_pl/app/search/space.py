"""A search's space, written in Hydra's own sweep grammar (as ``hydra-optuna-sweeper`` reads it), as Optuna's
distributions: ``choice(2,3,4)`` or ``2,3,4`` and ``range(2,5)`` are categorical, ``interval(1e-5,1e-3)`` a float
range, ``tag(log,interval(...))`` one drawn on a log scale. The keys come from ``hydra.sweeper.params`` and from the
command line's sweep overrides (the command line's last override of a key winning); a plain override of a searched
key fixes it (``method=theseus`` or ``++method=theseus``: the method is not searched), and the command line's plain
overrides are passed to every trial as they are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from theseus_pl.app.config.command_line import override_key

GRAMMAR = "choice(a,b), a,b, range(2,5), interval(1e-5,1e-3) or tag(log,interval(1e-5,1e-3))"


@dataclass(frozen=True)
class SearchSpace:
    """The searched keys' distributions (the keys as a trial's overrides spell them, ``+`` included), and the
    overrides every trial shares."""

    distributions: dict[str, BaseDistribution]
    fixed: list[str]

    def overrides(self, values: Mapping[str, Any]) -> list[str]:
        """One trial's overrides: the shared ones, then each searched key at its drawn value."""
        return [*self.fixed, *(f"{key}={_spelled(values[key])}" for key in self.distributions)]

    def is_choice(self, key: str) -> bool:
        """Whether the key is searched over a list of values (not an interval)."""
        return isinstance(self.distributions[key], CategoricalDistribution)

    def ends(self) -> dict[str, list[Any]]:
        """Each searched key's values at the edges of its range: every choice, an interval's two ends."""
        return {key: _ends(distribution) for key, distribution in self.distributions.items()}


def search_space(params: Mapping[str, Any], command_line: Sequence[str]) -> SearchSpace:
    """The space of ``hydra.sweeper.params`` and the command line's sweep overrides; a ``ValueError`` names a value
    of another grammar, or a key with a single value (nothing to search: set it as a plain override)."""
    parser = OverridesParser.create()
    declared = parser.parse_overrides([f"{key}={value}" for key, value in params.items()])
    given = parser.parse_overrides(list(command_line))
    # By the key each names, Hydra's + or ++ aside: ++theseus.successor_layers=2 fixes the searched depth (matched as
    # spelled, the search drew it anyway, and the drawn value, after the fixed one, won)
    swept = {override_key(override.get_key_element()): override for override in declared}
    fixed: dict[str, Override] = {}
    for override in given:  # the last of a key's overrides wins, as in Hydra
        key = override_key(override.get_key_element())
        (swept if override.is_sweep_override() else fixed)[key] = override
        (fixed if override.is_sweep_override() else swept).pop(key, None)
    return SearchSpace({o.get_key_element(): _distribution(o) for o in swept.values()},
                       [o.input_line for o in fixed.values()])  # fmt: skip


def _distribution(override: Override) -> BaseDistribution:
    value = override.value()
    where = f"hydra.sweeper.params.{override.key_or_group}={override.input_line.split('=', 1)[1]}"
    if isinstance(value, IntervalSweep):
        if not value.start < value.end:
            raise ValueError(f"{where}: an interval's start must be below its end.")
        return FloatDistribution(value.start, value.end, log="log" in value.tags)
    if isinstance(value, ChoiceSweep | RangeSweep):
        choices = list(dict.fromkeys(override.sweep_string_iterator()))
        if len(choices) < 2:
            raise ValueError(f"{where} holds one value: nothing to search (set it as a plain override).")
        return CategoricalDistribution(choices)
    raise ValueError(f"{where} is no search range: give {GRAMMAR}.")


def _spelled(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _ends(distribution: BaseDistribution) -> list[Any]:
    if isinstance(distribution, CategoricalDistribution):
        return list(distribution.choices)
    assert isinstance(distribution, FloatDistribution)  # the two kinds search_space makes
    return [distribution.low, distribution.high]
