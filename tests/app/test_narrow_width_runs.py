"""Runs with successors narrower than the hidden width: shapes, pickled export, refusals before training."""

import pytest
from app_runs import compose_config, setting_problems, tiny_run_overrides
from narrow_models import HIDDEN, narrow_theseus, predecessor

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resources import resource_problems
from theseus_pl.app.kinds.task_model.record import ModelShape
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.io import load_successor
from theseus_pl.core.successors.narrow_width import NarrowWidthSuccessor

pytestmark = pytest.mark.quick


@pytest.fixture
def base_overrides(tiny_base, glue_dir, tmp_path):
    return tiny_run_overrides(tiny_base, glue_dir, tmp_path)


def test_a_run_with_narrow_width_successors_ships_them_pickled_and_reports_their_shape(base_overrides, tmp_path):
    results = run(compose_config(*base_overrides, f"theseus.successor.hidden_size={HIDDEN}"))
    assert results.failed_steps == {} and results.successor.format == "pickled module"
    assert results.successor.shape == ModelShape(layers=2, hidden_size=HIDDEN, intermediate_size=37)
    assert results.settings["theseus.successor.hidden_size"] == HIDDEN
    exported = load_successor(results.successor_dir)
    assert all(isinstance(layer, NarrowWidthSuccessor) for layer in find_layer_stack(exported).layers)
    assert results.params.successor_layers < results.params.predecessor_layers / 2
    card = (tmp_path / "run" / "successor" / "README.md").read_text()
    assert "| hidden size | 32 | 16 |" in card and "load_successor" in card
    assert "compressed from 4 to 2 layers (hidden size 32 to 16)" in " ".join(card.split())


@pytest.mark.parametrize("value", [0, -16])
def test_a_hidden_size_below_one_is_named(value):
    (problem,) = setting_problems(compose_config(f"theseus.successor.hidden_size={value}"))
    assert problem.startswith(f"theseus.successor.hidden_size={value} must be null")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([f"theseus.successor.hidden_size={32}"], "hidden_size=32 must be at least 1 and below the predecessor's 32"),
        (["theseus.successor.hidden_size=10"], "hidden_size=10 must be a multiple of the predecessor's 4 attention"),
        ([f"theseus.successor.hidden_size={HIDDEN}", "method=kd"], "method=kd builds its student from whole"),
    ],
)
def test_hidden_sizes_that_do_not_fit_the_model_refuse_the_run_before_training(base_overrides, overrides, message):
    with pytest.raises(RunRefused, match=message):
        run(compose_config(*base_overrides, *overrides))


def test_transfer_from_a_pickled_successor_is_refused_before_anything_loads(tiny_base, glue_dir, tmp_path):
    folder = narrow_theseus(predecessor(), 2).export(tmp_path / "narrow")
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    (problem,) = resource_problems(compose_config(*overrides, "method=transfer", f"method.successor={folder}"))
    assert problem.startswith(f"method.successor='{folder}': a pickled successor")
