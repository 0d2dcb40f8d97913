"""Property-based passes over what users type and the files they bring: every value of the wrong type or range for
each option the settings check knows, and small own-data files with nulls, byte-order marks, CRLF line ends, unseen
labels, empty rows and fields too many. Each example is refused in lines that name what is wrong, or it is taken;
none reaches a traceback. Bounded in examples (and so in seconds: about 10 s on one AMX core)."""

from __future__ import annotations

import json
import math

import pytest
from app_runs import compose_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf, open_dict

from theseus_pl.app.checks.settings import RULES, checked_settings
from theseus_pl.data.datamodule import resolve_task
from theseus_pl.data.sources import FilesSource

pytestmark = pytest.mark.quick

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
BASE = compose_config("+experiment=demo")

WRONG_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["no", "yes", "auto", "-1", "1e3", "", " ", "null", "~/x", "../..", "a/b", "ñø☃"]),
    st.lists(st.one_of(st.integers(-3, 3), st.text(max_size=4)), max_size=3),
)


@FUZZ
@given(key=st.sampled_from(sorted(RULES)), value=WRONG_VALUES)
def test_any_value_of_any_checked_option_is_refused_in_lines_naming_it_or_taken(key, value):
    cfg = OmegaConf.create(OmegaConf.to_container(BASE))
    with open_dict(cfg):
        OmegaConf.update(cfg, key, value, force_add=True)
    problems = checked_settings(cfg).problems  # never raises
    assert all(isinstance(problem, str) and problem.strip() for problem in problems)
    valid = RULES[key].valid(value)
    if not valid:  # refused, naming the option
        assert any(problem.startswith(f"{key}=") or key in problem for problem in problems), (key, value, problems)


LABELS = ["neg", "pos"]
FIELD = st.one_of(
    st.sampled_from(["good", "bad film", 'a "quoted" one', "commas, here", "", " ", "null", "NaN", "né", "\u00a0x"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=8),
)
ROW = st.tuples(FIELD, st.sampled_from([*LABELS, "meh", "", "POS", " pos"]), st.booleans())  # text, label, extra


@FUZZ
@given(rows=st.lists(ROW, max_size=6), bom=st.booleans(), crlf=st.booleans(), suffix=st.sampled_from(["csv", "jsonl"]),
       blank_lines=st.booleans())  # fmt: skip
def test_any_small_own_file_is_read_or_refused_naming_it(tmp_path_factory, rows, bom, crlf, suffix, blank_lines):
    path = tmp_path_factory.mktemp("fuzz") / f"train.{suffix}"
    end = "\r\n" if crlf else "\n"
    if suffix == "csv":  # written by hand, unquoted: a comma in a text is a field too many
        lines = ["review,stars", *(f"{text},{label}" + (",x" if extra else "") for text, label, extra in rows)]
    else:  # JSON lines: a row may lack its text (extra: the key left out) or hold null
        lines = [json.dumps({"stars": label, **({} if extra else {"review": None if text == "null" else text})})
                 for text, label, extra in rows]  # fmt: skip
    if blank_lines:
        lines.insert(len(lines) // 2 + 1, "")
    path.write_bytes(("\ufeff" if bom else "").encode() + end.join(lines).encode() + end.encode())
    task = resolve_task("reviews", files={"train": str(path)}, text_columns=["review"], labels=LABELS)
    try:
        dataset = FilesSource({"train": path}, label_column="stars").read(task, "train")
    except ValueError as refused:
        assert str(path) in str(refused) or "The train split of reviews" in str(refused), refused
        assert "\n" not in str(refused).strip(), refused
        return
    assert len(dataset) >= 1 and set(dataset["label"]) <= {0, 1}
    assert all(isinstance(text, str) for text in dataset["review"])
    assert not any(isinstance(v, float) and math.isnan(v) for v in dataset["label"])
