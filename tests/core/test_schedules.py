import itertools

import pytest

from theseus_pl.core.schedules import (
    AntiCurriculumSchedule,
    ConstantSchedule,
    CurriculumSchedule,
)

pytestmark = pytest.mark.quick


def test_constant_rate_holds_p_until_the_switch_then_is_one():
    schedule = ConstantSchedule(p=0.5, switch_step=100)
    assert [schedule.rate(t) for t in (0, 1, 99, 100, 5000)] == [0.5, 0.5, 0.5, 1.0, 1.0]


def test_curriculum_grows_linearly_and_saturates_at_one():
    schedule = CurriculumSchedule(b=0.3, k=0.01)
    assert schedule.rate(0) == pytest.approx(0.3)
    assert schedule.rate(35) == pytest.approx(0.65)
    assert schedule.rate(70) == 1.0
    assert schedule.rate(10_000) == 1.0
    assert schedule.switch_step == 70


@pytest.mark.parametrize("b", [0.1, 0.3])
@pytest.mark.parametrize("steps", [1000, 5000, 10000, 30000])
def test_steps_to_full_reaches_one_exactly_at_that_step(b, steps):
    """The paper's grid is stated as steps to p = 1; float rounding must not shift the switch by a step."""
    schedule = CurriculumSchedule.from_steps_to_full(b=b, steps_to_full=steps)
    assert schedule.switch_step == steps
    assert schedule.rate(steps - 1) < 1.0
    assert schedule.rate(steps) == 1.0
    assert schedule.k == pytest.approx((1 - b) / steps)


def test_anti_curriculum_falls_from_one_minus_b_to_zero_then_switches_to_one():
    schedule = AntiCurriculumSchedule.from_steps_to_full(b=0.1, steps_to_full=90)
    rates = [schedule.rate(t) for t in range(90)]
    assert rates[0] == pytest.approx(0.9)
    assert all(later < earlier for earlier, later in itertools.pairwise(rates))
    assert rates[-1] == pytest.approx(0.01)
    assert schedule.switch_step == 90
    assert schedule.rate(90) == 1.0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ConstantSchedule(p=1.5, switch_step=10), r"p=1.5 is outside \[0, 1\]"),
        (lambda: ConstantSchedule(p=-0.1, switch_step=10), r"p=-0.1 is outside \[0, 1\]"),
        (lambda: ConstantSchedule(p=0.5, switch_step=-1), "switch_step=-1 must be >= 0"),
        (lambda: CurriculumSchedule(b=1.2, k=0.1), r"b=1.2 is outside \[0, 1\]"),
        (lambda: CurriculumSchedule(b=0.1, k=0.0), "k=0.0 must be > 0"),
        (lambda: CurriculumSchedule(b=0.1, k=-1e-4), "k=-0.0001 must be > 0"),
        (lambda: CurriculumSchedule.from_steps_to_full(b=0.1, steps_to_full=0), "steps_to_full=0 must be >= 1"),
        (lambda: CurriculumSchedule.from_steps_to_full(b=-0.5, steps_to_full=10), "b=-0.5 is outside"),
    ],
)
def test_bad_schedule_values_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (
            CurriculumSchedule.from_steps_to_full(b=0.3, steps_to_full=150),
            "curriculum: p = 0.3 at step 0, 1 from step 150",
        ),
        (CurriculumSchedule(b=0.3, k=0.004666666666666666), "curriculum: p = 0.3 at step 0, 1 from step 150"),
        (CurriculumSchedule(b=0.1, k=0.01), "curriculum: p = 0.1 at step 0, 1 from step 90"),
        (CurriculumSchedule(b=1.0, k=0.5), "curriculum: p = 1 from step 0"),
        (ConstantSchedule(p=0.5, switch_step=1000), "constant: p = 0.5 until step 1000, then 1"),
        (ConstantSchedule(p=0.7, switch_step=0), "constant: p = 1 from step 0"),
        (
            AntiCurriculumSchedule.from_steps_to_full(b=0.3, steps_to_full=150),
            "anti-curriculum: p = 0.7 at step 0, falling towards 0, 1 from step 150",
        ),
        (AntiCurriculumSchedule.from_steps_to_full(b=1.0, steps_to_full=5), "anti-curriculum: p = 1 from step 0"),
    ],
)
def test_each_schedule_describes_itself_as_people_read_it(schedule, text):
    assert schedule.describe() == text
    assert schedule.rate(schedule.switch_step) == 1.0  # the step the text names is where p reaches 1 for good
