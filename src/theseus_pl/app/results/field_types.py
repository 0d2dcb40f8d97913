"""A record read from a file holds what its fields say they hold: each value checked against its annotation.

A ``results.json`` edited by hand, or written by another tool, can hold a score as text (``"55.0"``) or a count as
a fraction. Read unchecked, such a value ends the report, publish or deploy in a ``TypeError`` far from the file,
after deploy has exported and timed; a JSON ``Infinity`` becomes ``inf`` in a table without a word. The writer never
writes either: it writes a number that is not finite as null (:func:`~.envelope.write_json`). So a ``float`` field
takes a finite number, or null (the writer's not-a-number), and nothing else.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from theseus_pl.app.results.envelope import ResultsError


def check_types(record: Any, where: str = "") -> None:
    """Refuse, naming its dotted key, the first value of ``record`` (a dataclass, nested ones included) that its
    field's annotation does not allow. A record that is no dataclass declares no fields to check."""
    if not is_dataclass(record):
        return
    problem = _record_problem(record, where)
    if problem:
        raise ResultsError(problem)


def _record_problem(record: Any, where: str) -> str | None:
    hints = _hints(type(record))
    problems = (_problem(getattr(record, f.name), hints[f.name], f"{where}{f.name}") for f in fields(record))
    return next(filter(None, problems), None)


@functools.cache
def _hints(record_type: type) -> dict[str, Any]:
    """The record's annotations resolved (read once per type: a report reads hundreds of records)."""
    return typing.get_type_hints(record_type)


def _problem(value: Any, annotation: Any, key: str) -> str | None:
    """Why ``value`` does not fit ``annotation``, naming ``key`` (the value's dotted path); None where it fits."""
    if annotation is Any:
        return None
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if any(_problem(value, member, key) is None for member in arguments):
            return None
        shaped = [member for member in arguments if _shaped_like(value, member)]  # a list's item, inf, ...
        return _problem(value, shaped[0], key) if shaped else _wrong(key, value, annotation)
    if annotation is type(None):
        return None if value is None else _wrong(key, value, annotation)
    if annotation is float:
        if value is None:  # a NaN as the writer writes it
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            finite = math.isfinite(value)
            return None if finite else f"{key} is {value}: theseus_pl writes a number that is not finite as null"
        return _wrong(key, value, annotation)
    if annotation is int or annotation is str or annotation is bool:
        fits = isinstance(value, annotation) and (annotation is bool or not isinstance(value, bool))
        return None if fits else _wrong(key, value, annotation)
    if annotation is Path:
        return None if isinstance(value, Path | str) else _wrong(key, value, annotation)
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            return _wrong(key, value, annotation)
        item_type = arguments[0] if arguments else Any
        return next(filter(None, (_problem(item, item_type, f"{key}[{i}]") for i, item in enumerate(value))), None)
    if origin is dict:
        if not isinstance(value, dict):
            return _wrong(key, value, annotation)
        item_type = arguments[1] if arguments else Any
        return next(filter(None, (_problem(item, item_type, f"{key}.{name}") for name, item in value.items())), None)
    if is_dataclass(annotation):
        return _record_problem(value, f"{key}.") if isinstance(value, annotation) else _wrong(key, value, annotation)
    raise TypeError(f"check_types cannot check {key}'s annotation {annotation!r}")  # a field of a new kind of type


def _shaped_like(value: Any, annotation: Any) -> bool:
    """Whether ``value`` is the number, list, object or record ``annotation`` is, though it may still be wrong (not
    finite, an item of another type): in a union, that member says best what is wrong."""
    origin = typing.get_origin(annotation)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin in (list, tuple):
        return isinstance(value, list | tuple)
    if origin is dict:
        return isinstance(value, dict)
    return is_dataclass(annotation) and isinstance(value, annotation)


def _wrong(key: str, value: Any, annotation: Any) -> str:
    return f"{key} is {value!r} ({_json_name(value)}), not {_expected(annotation)}"


def _json_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _expected(annotation: Any) -> str:
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_expected(member) for member in arguments)
    names = {float: "a number", int: "a whole number", str: "text", bool: "true or false", type(None): "null",
             Path: "text"}  # fmt: skip
    if annotation in names:
        return names[annotation]
    if origin in (list, tuple):
        return "a list"
    if origin is dict or is_dataclass(annotation):
        return "an object"
    return repr(annotation)
