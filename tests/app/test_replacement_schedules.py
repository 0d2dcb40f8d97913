"""The ``replacement`` configs as schedules: one registry from ``replacement.kind`` to the library's classes."""

from pathlib import Path

import pytest
from app_runs import compose_config

from theseus_pl.app.methods.schedules import SCHEDULES, build_schedule
from theseus_pl.core.schedules import AntiCurriculumSchedule, ConstantSchedule, CurriculumSchedule

pytestmark = pytest.mark.quick

CONF = Path(__file__).parents[2] / "conf"


def test_build_schedule_from_config_values():
    assert build_schedule("constant", p=0.5, switch_step=10) == ConstantSchedule(0.5, 10)
    assert build_schedule("curriculum", b=0.1, k=0.01) == CurriculumSchedule(0.1, 0.01)
    assert build_schedule("anti_curriculum", b=0.1, steps_to_full=90).switch_step == 90
    assert build_schedule("curriculum", b=0.1, k=0.01, steps_to_full=9) == CurriculumSchedule(0.1, 0.01), "k wins"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: build_schedule("constant", p=0.5), "needs replacement.p and replacement.switch_step"),
        (
            lambda: build_schedule("curriculum", b=0.1),
            "needs replacement.b and replacement.k or replacement.steps_to_full",
        ),
        (
            lambda: build_schedule("linear", b=0.1, k=0.1),
            "Unknown replacement kind 'linear'; choose constant, curriculum or anti_curriculum.",
        ),
    ],
)
def test_incomplete_or_unknown_schedules_are_refused_in_config_terms(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_each_replacement_config_is_one_registered_kind():
    kinds = {path.stem for path in (CONF / "replacement").glob("*.yaml")}
    assert kinds == set(SCHEDULES)
    built = {kind: type(build_schedule(**compose_config(f"replacement={kind}").replacement)) for kind in kinds}
    assert built == {
        "constant": ConstantSchedule, "curriculum": CurriculumSchedule, "anti_curriculum": AntiCurriculumSchedule
    }  # fmt: skip
