"""The ``replacement`` config group as a schedule: one registry from ``replacement.kind`` to the library's classes.

``conf/replacement/<kind>.yaml`` holds a kind's flat values; :data:`SCHEDULES` turns them into the schedule of
:mod:`theseus_pl.core.schedules` (pure functions of the step, which check their own values and name their Python
arguments; the app rewords those as ``replacement.*``). A new schedule is a class in the core, one entry here and
one config file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from theseus_pl.core.schedules import (
    AntiCurriculumSchedule,
    ConstantSchedule,
    CurriculumSchedule,
    ReplacementSchedule,
)


@dataclass(frozen=True)
class ReplacementSettings:
    """The ``replacement`` group's values; each kind reads those it needs (an unknown key is a TypeError)."""

    kind: str
    p: float | None = None
    switch_step: int | None = None
    b: float | None = None
    k: float | None = None
    steps_to_full: int | None = None


def constant(settings: ReplacementSettings) -> ConstantSchedule:
    if settings.p is None or settings.switch_step is None:
        raise ValueError(f"replacement={settings.kind} needs replacement.p and replacement.switch_step.")
    return ConstantSchedule(p=settings.p, switch_step=settings.switch_step)


def curricular(cls: type[CurriculumSchedule], settings: ReplacementSettings) -> CurriculumSchedule:
    """``k`` when it is set, else ``steps_to_full``: the config sets ``steps_to_full`` by default, so
    ``replacement.k=...`` alone on the command line is enough."""
    b, k, steps_to_full = settings.b, settings.k, settings.steps_to_full
    if b is None or (k is None and steps_to_full is None):
        raise ValueError(
            f"replacement={settings.kind} needs replacement.b and replacement.k or replacement.steps_to_full."
        )
    return cls(b=b, k=k) if k is not None else cls.from_steps_to_full(b, steps_to_full)


@dataclass(frozen=True)
class ScheduleKind:
    """A ``replacement.kind``: how its schedule is built, and the values it reads (any other set is refused: it
    would be recorded as the run's while no schedule read it)."""

    build: Callable[[ReplacementSettings], ReplacementSchedule]
    reads: tuple[str, ...]


CURRICULAR = ("b", "k", "steps_to_full")
SCHEDULES: dict[str, ScheduleKind] = {
    "constant": ScheduleKind(constant, ("p", "switch_step")),
    "curriculum": ScheduleKind(functools.partial(curricular, CurriculumSchedule), CURRICULAR),
    "anti_curriculum": ScheduleKind(functools.partial(curricular, AntiCurriculumSchedule), CURRICULAR),
}


def build_schedule(kind: str, **values: object) -> ReplacementSchedule:
    """The schedule that ``replacement=<kind>`` and its values describe (``build_schedule(**cfg.replacement)``)."""
    settings = ReplacementSettings(kind, **values)
    if kind not in SCHEDULES:
        *others, last = SCHEDULES
        raise ValueError(f"Unknown replacement kind {kind!r}; choose {', '.join(others)} or {last}.")
    reads = SCHEDULES[kind].reads
    unread = [f"replacement.{key}={value}" for key, value in values.items() if value is not None and key not in reads]
    if unread:
        raise ValueError(
            f"{', '.join(unread)}: replacement={kind} reads {', '.join(f'replacement.{key}' for key in reads)} "
            "only; it would be recorded as the run's and never read. Drop it, or choose the replacement that reads it."
        )
    return SCHEDULES[kind].build(settings)


def successor_finetuning_steps(schedule: ReplacementSchedule | None, steps: int) -> int | None:
    """Optimizer steps a run of ``steps`` trained after ``schedule``'s switch to p = 1 (phase 2, where
    ``theseus.finetune_shared`` trains the shared modules): 0 where it ended first; None where no schedule replaced
    modules. What a record says of phase 2 rather than what its settings asked for."""
    return max(0, steps - schedule.switch_step) if schedule else None
