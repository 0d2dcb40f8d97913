"""Settings that check themselves: every refused field at once, each named with its value and what is valid."""

import pytest

from theseus_pl.core.settings import (
    Rule,
    SettingsError,
    check_fields,
    field_problems,
    number,
    one_of,
    optional_positive_int,
    positive_int,
    positive_number,
)

pytestmark = pytest.mark.quick

RULES = {
    "layers": Rule(positive_int, "a whole number, at least 1"),
    "width": Rule(optional_positive_int, "null or a whole number, at least 1"),
    "init": Rule(one_of(("bottom", "top")), "one of bottom, top"),
}


def test_every_refused_field_is_named_with_its_value_and_what_is_valid():
    problems = field_problems({"layers": True, "width": 0, "init": "middle"}, RULES, prefix="group.")
    assert problems == {
        "layers": "group.layers=True must be a whole number, at least 1.",
        "width": "group.width=0 must be null or a whole number, at least 1.",
        "init": "group.init='middle' must be one of bottom, top.",
    }
    assert field_problems({"layers": 2, "init": "top"}, RULES) == {}, "a missing value is checked as None"


def test_a_settings_error_carries_every_problem_by_field():
    with pytest.raises(SettingsError) as raised:
        check_fields({"layers": 0, "width": None, "init": "top"}, RULES)
    assert raised.value.problems == {"layers": "layers=0 must be a whole number, at least 1."}
    assert isinstance(raised.value, ValueError) and str(raised.value) == "layers=0 must be a whole number, at least 1."
    check_fields({"layers": 1, "width": 3, "init": "bottom"}, RULES)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), True, "2e-5", None])
def test_a_number_is_finite_and_no_bool_or_text(value):
    assert not number(value) and not positive_number(value)


def test_finite_numbers_pass_by_their_sign():
    assert number(-1.5) and number(0) and positive_number(2e-5) and not positive_number(0)
