"""Runs and settings of successors other than a copied layer: shapes in results, refusals before training, resume."""

import json

import pytest
import torch
from app_runs import compose_config, setting_problems, tiny_run_overrides

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.kinds.task_model.record import ModelShape
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.io import load_successor

WIDTH = 20  # of the tiny models' 37 feed-forward neurons


@pytest.fixture
def base_overrides(tiny_base, glue_dir, tmp_path):
    return tiny_run_overrides(tiny_base, glue_dir, tmp_path)


def test_a_run_with_narrower_successors_reports_their_shape(base_overrides, tmp_path):
    results = run(compose_config(*base_overrides, f"theseus.successor.intermediate_size={WIDTH}"))
    assert results.successor.shape == ModelShape(layers=2, hidden_size=32, intermediate_size=WIDTH)
    assert results.predecessor.shape.intermediate_size > WIDTH
    assert results.successor.format == "transformers" and results.failed_steps == {}
    assert results.settings["theseus.successor.importance"] == "activation"  # the default
    exported = load_successor(tmp_path / "run" / "successor")
    layer_params = sum(p.numel() for p in find_layer_stack(exported).layers.parameters())
    assert results.params.successor_layers == layer_params < results.params.predecessor_layers
    card = (tmp_path / "run" / "successor" / "README.md").read_text()
    assert f"| feed-forward width | {results.predecessor.shape.intermediate_size} | {WIDTH} |" in card


def test_a_run_chooses_neurons_by_their_activity_on_its_first_training_rows(base_overrides, tmp_path):
    settings = (f"theseus.successor.intermediate_size={WIDTH}", "theseus.successor.importance=activation")
    # The first run fine-tunes the predecessor; the second finds it cached, so only calibration reads the data.
    for folder in ("first", "second"):
        results = run(compose_config(*base_overrides, *settings, f"paths.output_dir={tmp_path / folder}"))
        assert results.settings["theseus.successor.importance"] == "activation" and results.failed_steps == {}
        assert results.successor.shape.intermediate_size == WIDTH
    assert results.predecessor.origin == "cache"


@pytest.mark.parametrize(  # feed-forward neurons chosen by activation, the default; a hidden width of 16 of 32
    "narrower", [f"theseus.successor.intermediate_size={WIDTH}", "theseus.successor.hidden_size=16"]
)
def test_an_interrupted_run_of_narrower_successors_resumes_to_the_uninterrupted_result(
    base_overrides, tmp_path, narrower
):
    narrower = (narrower,)
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*base_overrides, *narrower, *killed))
    resumed = run(compose_config(*base_overrides, *narrower))
    assert resumed.resumed_from and resumed.steps == 6
    whole = run(compose_config(*base_overrides, *narrower, f"paths.output_dir={tmp_path / 'whole'}"))
    assert resumed.successor.shape == whole.successor.shape
    after_resume, uninterrupted = (load_successor(r.successor_dir).state_dict() for r in (resumed, whole))
    assert after_resume.keys() == uninterrupted.keys()
    assert all(torch.equal(after_resume[name], uninterrupted[name]) for name in uninterrupted)


def test_a_run_with_a_custom_factory_ships_a_pickled_successor(base_overrides, tmp_path):
    target = "theseus.successor._target_=theseus_pl.core.successors.feed_forward_block"
    results = run(compose_config(*base_overrides, target))
    assert results.successor.format == "pickled module" and results.failed_steps == {}
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["successor"]["score"] == results.successor.score
    assert "load_successor" in (tmp_path / "run" / "successor" / "README.md").read_text()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("theseus.successor.intermediate_size=0", "theseus.successor.intermediate_size=0 must be null"),
        ("theseus.successor.intermediate_size=-3", "theseus.successor.intermediate_size=-3 must be null"),
        ("theseus.successor.importance=loudest", "theseus.successor.importance='loudest' must be one of magnitude"),
        ("theseus.successor._target_=nowhere.factory", "theseus.successor._target_='nowhere.factory' must be the"),
    ],
)
def test_each_bad_successor_setting_is_named(override, message):
    (problem,) = setting_problems(compose_config(override))
    assert problem.startswith(message)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["theseus.successor.intermediate_size=37"], "must be below the predecessor's feed-forward width, 37"),
        (["theseus.successor.intermediate_size=8", "method=kd"], "method=kd builds its student from whole"),
    ],
)
def test_successor_settings_that_do_not_fit_the_model_refuse_the_run(base_overrides, overrides, message):
    with pytest.raises(RunRefused, match=message):
        run(compose_config(*base_overrides, *overrides))
