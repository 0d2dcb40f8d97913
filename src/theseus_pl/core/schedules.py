"""Replacement-rate schedules: pure functions of the optimizer step ``t``.

Each schedule also names its ``switch_step``: the first step of successor fine-tuning, where ``p = 1`` for
good and every module is the successor's. Callbacks read these; nothing here keeps state. Each schedule checks its
own values when built, naming its arguments; the app builds them from its ``replacement`` configs
(``theseus_pl.app.methods.schedules``).

``describe()`` gives a schedule as people read it (``curriculum: p = 0.3 at step 0, 1 from step 150``): what model
cards, logs and ``results.json`` show. It is a method, not ``__str__``: the text rounds its numbers (6 significant
digits), so it is asked for where it is meant, while ``repr`` (and ``str``, which defaults to it) keeps the exact
values for debugging and error messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# k·t + b computed in floating point can land a hair under 1 at the intended step.
_FULL = 1.0 - 1e-9


def constant_rate(step: int, p: float, switch_step: int) -> float:
    """``p`` until ``switch_step``, then 1."""
    return 1.0 if step >= switch_step else p


def curriculum_rate(step: int, k: float, b: float) -> float:
    """The paper's linear curriculum ``min(1, k·t + b)``."""
    rate = k * step + b
    return 1.0 if rate >= _FULL else rate


def anti_curriculum_rate(step: int, k: float, b: float) -> float:
    """The ablation baseline ``1 - min(1, k·t + b)``; it falls to 0 where the curriculum reaches 1."""
    return 1.0 - curriculum_rate(step, k, b)


def _check_number(name: str, value: object, integer: bool = False) -> None:
    """A value of the wrong type (a sweep's ``replacement.b=high``) gets a message, not a comparison error."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ValueError(f"{name}={value!r} must be {'an integer' if integer else 'a number'}.")


def _check_probability(name: str, value: float) -> None:
    _check_number(name, value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={value} is outside [0, 1]; it is a probability.")


@dataclass(frozen=True)
class ConstantSchedule:
    """Replace each module with probability ``p`` until ``switch_step``, then fine-tune the successor alone."""

    p: float
    switch_step: int

    def __post_init__(self) -> None:
        _check_probability("p", self.p)
        _check_number("switch_step", self.switch_step, integer=True)
        if self.switch_step < 0:
            raise ValueError(
                f"switch_step={self.switch_step} must be >= 0: it is the optimizer step at which "
                "successor fine-tuning (p = 1) starts."
            )

    def rate(self, step: int) -> float:
        return constant_rate(step, self.p, self.switch_step)

    def describe(self) -> str:
        """``constant: p = 0.5 until step 1000, then 1``."""
        if self.switch_step == 0:
            return "constant: p = 1 from step 0"
        return f"constant: p = {self.p:g} until step {self.switch_step}, then 1"


@dataclass(frozen=True)
class CurriculumSchedule:
    """``p = min(1, k·t + b)``; reaching ``p = 1`` is the switch to successor fine-tuning.

    Give either ``k`` or ``steps_to_full`` (the paper states its grid as the number of steps for ``p`` to
    reach 1; then ``k = (1 - b) / steps_to_full``).
    """

    b: float
    k: float

    def __post_init__(self) -> None:
        _check_probability("b", self.b)
        _check_number("k", self.k)
        if not self.k > 0:
            raise ValueError(f"k={self.k} must be > 0 so that p grows to 1; or give steps_to_full.")

    @classmethod
    def from_steps_to_full(cls, b: float, steps_to_full: int) -> CurriculumSchedule:
        _check_number("steps_to_full", steps_to_full, integer=True)
        if steps_to_full < 1:
            raise ValueError(f"steps_to_full={steps_to_full} must be >= 1.")
        _check_probability("b", b)
        return cls(b=b, k=(1.0 - b) / steps_to_full if b < 1 else 1.0)

    @property
    def switch_step(self) -> int:
        """First step with ``k·t + b >= 1``."""
        return max(0, math.ceil((_FULL - self.b) / self.k))

    def rate(self, step: int) -> float:
        return curriculum_rate(step, self.k, self.b)

    def describe(self) -> str:
        """``curriculum: p = 0.3 at step 0, 1 from step 150`` (rising linearly in between: ``min(1, k·t + b)``)."""
        if self.switch_step == 0:
            return "curriculum: p = 1 from step 0"
        return f"curriculum: p = {self.rate(0):g} at step 0, 1 from step {self.switch_step}"


@dataclass(frozen=True)
class AntiCurriculumSchedule(CurriculumSchedule):
    """Ablation: ``p = 1 - min(1, k·t + b)``, falling to 0; successor fine-tuning (p = 1) follows from there.

    Without that final phase the successor would stop being trained once ``p`` hits 0, so the comparison with
    the curriculum would be unfair; both switch at the same step.
    """

    def rate(self, step: int) -> float:
        return 1.0 if step >= self.switch_step else anti_curriculum_rate(step, self.k, self.b)

    def describe(self) -> str:
        """``anti-curriculum: p = 0.7 at step 0, falling towards 0, 1 from step 150`` (falling linearly)."""
        if self.switch_step == 0:
            return "anti-curriculum: p = 1 from step 0"
        return f"anti-curriculum: p = {self.rate(0):g} at step 0, falling towards 0, 1 from step {self.switch_step}"


ReplacementSchedule = ConstantSchedule | CurriculumSchedule
