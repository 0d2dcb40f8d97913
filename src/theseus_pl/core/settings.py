"""Settings that check themselves: a settings object names every problem with its own fields, all at once.

A settings class states one :class:`Rule` per field (what a valid value is) and checks its values against them
when it is built; :class:`SettingsError` carries every problem found, keyed by field, so that an application can
gather the problems of all its settings into one message and name each field as its users set it (the app
rewords ``alpha=2`` as ``method.alpha=2``). Plain Python: the core, the deployment stage, the Lightning floor
and the app share it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    """A field's rule: ``valid(value)``, and what a valid value is, to finish ``<field>=<value> must be ...``."""

    valid: Callable[[Any], bool]
    expected: str


class SettingsError(ValueError):
    """Every problem with one settings object: ``problems`` maps each field to its message."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("\n".join(self.problems.values()))


def field_problems(values: Mapping[str, Any], rules: Mapping[str, Rule], prefix: str = "") -> dict[str, str]:
    """``{field: "<prefix><field>=<value> must be <expected>."}`` for each value its rule refuses (a missing
    value is checked as None)."""
    problems = {}
    for name, rule in rules.items():
        value = values.get(name)
        if not rule.valid(value):
            problems[name] = f"{prefix}{name}={value!r} must be {rule.expected}."
    return problems


def check_fields(values: Mapping[str, Any], rules: Mapping[str, Rule], prefix: str = "") -> None:
    """A :class:`SettingsError` naming every value its rule refuses; nothing when all are valid."""
    problems = field_problems(values, rules, prefix)
    if problems:
        raise SettingsError(problems)


def whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def number(value: Any) -> bool:
    """A finite int or float: an infinite learning rate, weight decay or temperature trains nothing but NaN."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def boolean(value: Any) -> bool:
    return isinstance(value, bool)


def positive_int(value: Any) -> bool:
    return whole_number(value) and value >= 1


def optional_positive_int(value: Any) -> bool:
    return value is None or positive_int(value)


def positive_number(value: Any) -> bool:
    return number(value) and value > 0


def one_of(choices: Iterable[Any]) -> Callable[[Any], bool]:
    allowed = tuple(choices)
    return lambda value: value in allowed
