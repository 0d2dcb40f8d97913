"""Successor modules other than a copied layer: narrower feed-forward networks and a researcher's own factory."""

import copy
import functools
import json

import pytest
import torch
from conftest import assert_training_moves_only_successors, compose_config, tiny_inputs, tiny_model, tiny_run_overrides
from transformers import AutoModelForSequenceClassification

from theseus_pl.app.deploy_folder import deploy_model
from theseus_pl.app.pipeline import run
from theseus_pl.app.run_checks import RunRefused
from theseus_pl.app.settings_check import setting_problems
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.io import PICKLED, load_successor
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors.activity import neuron_activity
from theseus_pl.core.successors.copied import (
    FEED_FORWARDS,
    FeedForwardBlock,
    copied_layer,
    feed_forward_block,
    neuron_importance,
    shape_of,
)
from theseus_pl.deployment.stage import DeploySettings

WIDTH = 20  # of the tiny models' 37 feed-forward neurons


def narrow(width=WIDTH, importance="magnitude", seed=0):
    return functools.partial(copied_layer, intermediate_size=width, importance=importance, seed=seed)


def test_a_narrower_successor_exports_a_plain_checkpoint_with_the_same_logits(family, tmp_path):
    theseus = TheseusModel(tiny_model(family), 2, factory=narrow()).eval()
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = theseus(None, **inputs).logits
        exported = AutoModelForSequenceClassification.from_pretrained(theseus.export(tmp_path / "successor"))
        torch.testing.assert_close(exported(**inputs).logits, expected, atol=1e-5, rtol=0)
    width = FEED_FORWARDS[exported.config.model_type].width
    assert getattr(exported.config, width) == WIDTH and exported.config.num_hidden_layers == 2
    assert not (tmp_path / "successor" / PICKLED).exists()


def test_the_kept_neurons_are_the_most_important_and_keep_their_weights(family):
    model = tiny_model(family)
    layout = FEED_FORWARDS[model.config.model_type]
    source = find_layer_stack(model).layers[0]
    expand, contract = source.get_submodule(layout.expand), source.get_submodule(layout.contract)
    by_hand = torch.cat([expand.weight, expand.bias[:, None]], 1).norm(dim=1) * contract.weight.norm(dim=0)
    torch.testing.assert_close(neuron_importance(expand, contract), by_hand)
    kept = by_hand.topk(WIDTH).indices.sort().values

    layer = copied_layer([source], source, model.config, intermediate_size=WIDTH)
    assert torch.equal(layer.get_submodule(layout.expand).weight, expand.weight[kept])
    assert torch.equal(layer.get_submodule(layout.expand).bias, expand.bias[kept])
    assert torch.equal(layer.get_submodule(layout.contract).weight, contract.weight[:, kept])
    assert torch.equal(layer.get_submodule(layout.contract).bias, contract.bias)


def test_a_narrower_layer_is_the_layer_with_the_dropped_neurons_silenced():
    model = tiny_model().eval()
    source = model.bert.encoder.layer[0]
    layer = copied_layer([source], source, model.config, intermediate_size=WIDTH).eval()
    silenced = copy.deepcopy(source)
    dropped = torch.ones(37, dtype=torch.bool)
    dropped[neuron_importance(source.intermediate.dense, source.output.dense).topk(WIDTH).indices] = False
    with torch.no_grad():
        silenced.output.dense.weight[:, dropped] = 0
        hidden = torch.randn(2, 5, 32)
        torch.testing.assert_close(layer(hidden), silenced(hidden), atol=1e-6, rtol=0)


def test_random_importance_is_seeded_and_differs_from_magnitude():
    model = tiny_model()
    source = model.bert.encoder.layer[0]

    def kept(**settings):
        layer = copied_layer([source], source, model.config, intermediate_size=WIDTH, **settings)
        return layer.intermediate.dense.weight

    assert torch.equal(kept(importance="random", seed=3), kept(importance="random", seed=3))
    assert not torch.equal(kept(importance="random", seed=3), kept(importance="random", seed=4))
    assert not torch.equal(kept(importance="random", seed=3), kept(importance="magnitude"))


def test_activity_is_each_neurons_mean_absolute_activation_over_real_tokens_only(family):
    model = tiny_model(family).eval()
    layout = FEED_FORWARDS[model.config.model_type]
    layers = list(find_layer_stack(model).layers)
    inputs = tiny_inputs()  # the last row is half padding
    recorded = {}
    hooks = [layer.get_submodule(layout.contract).register_forward_pre_hook(
        lambda module, args, i=i: recorded.__setitem__(i, args[0])) for i, layer in enumerate(layers)]  # fmt: skip
    with torch.no_grad():
        model(**inputs)
    for hook in hooks:
        hook.remove()
    real = inputs["attention_mask"].bool()
    activity = neuron_activity(model, [inputs])
    assert list(activity) == layers
    for i, layer in enumerate(layers):
        torch.testing.assert_close(activity[layer], recorded[i][real].abs().mean(dim=0))
    # Split in two batches, the same tokens give the same activity: a mean over tokens, not over batches.
    halves = [{k: v[:1] for k, v in inputs.items()}, {k: v[1:] for k, v in inputs.items()}]
    for layer, value in neuron_activity(model, halves).items():
        torch.testing.assert_close(value, activity[layer])


def test_activation_importance_keeps_the_neurons_that_move_the_hidden_state_most_on_text():
    model = tiny_model()
    source = model.bert.encoder.layer[0]
    activity = torch.rand(37)
    activity[[4, 9, 30]] = 100.0  # fire hard on the training text
    layer = copied_layer([source], source, model.config, intermediate_size=WIDTH, importance="activation",
                         activity={source: activity})  # fmt: skip
    score = activity * source.output.dense.weight.norm(dim=0)
    kept = score.topk(WIDTH).indices.sort().values
    assert {4, 9, 30} <= set(kept.tolist())
    assert torch.equal(layer.intermediate.dense.weight, source.intermediate.dense.weight[kept])
    with pytest.raises(ValueError, match="importance=activation needs the neurons' activity"):
        copied_layer([source], source, model.config, intermediate_size=WIDTH, importance="activation")


def test_training_narrower_successors_leaves_every_frozen_parameter_bit_identical():
    theseus = TheseusModel(tiny_model(), 2, factory=narrow()).train()
    assert_training_moves_only_successors(theseus, [p for p in theseus.parameters() if p.requires_grad])


def test_a_custom_factory_runs_trains_and_exports_its_own_modules(tmp_path):
    theseus = TheseusModel(tiny_model(), 2, factory=feed_forward_block).eval()
    assert all(isinstance(block.successor, FeedForwardBlock) for block in theseus.blocks)
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = theseus(None, **inputs).logits
        folder = theseus.export(tmp_path / "successor")
        assert (folder / PICKLED).is_file() and (folder / "config.json").is_file()
        loaded = load_successor(folder)
        torch.testing.assert_close(loaded(**inputs).logits, expected, atol=1e-6, rtol=0)
    assert find_layer_stack(loaded).layers[0].__class__ is FeedForwardBlock


class Widening(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width + 1)

    def forward(self, hidden_states, *args, **kwargs):
        return self.linear(hidden_states)


def test_a_pickled_successor_deploys_to_onnx_like_a_plain_one(tmp_path, tiny_tokenizer, glue_dir):
    theseus = TheseusModel(tiny_model("bert", num_labels=2), 2, factory=feed_forward_block)
    folder = theseus.export(tmp_path / "successor", tiny_tokenizer)
    settings = DeploySettings(batch_sizes=(1,), repeats=1, sequence_length=12, quantize=None)
    block = deploy_model(folder, settings, task="RTE", glue_dir=str(glue_dir))
    assert (folder / block["onnx"]).is_file() and block["max_abs_diff"] <= block["tolerance"]


def test_a_factory_whose_module_changes_the_shape_is_refused_before_training():
    def too_wide(module_layers, source, config):
        return Widening(config.hidden_size)

    with pytest.raises(
        ValueError, match=r"module 0 \(built by too_wide\) returned hidden states of shape \(1, 4, 33\)"
    ):
        TheseusModel(tiny_model(), 2, factory=too_wide)


def test_a_factory_whose_module_cannot_be_called_like_a_layer_is_refused():
    def bare_linear(module_layers, source, config):
        return torch.nn.Linear(config.hidden_size, config.hidden_size)

    with pytest.raises(ValueError, match=r"modules built by bare_linear do not run in the model: .*argument"):
        TheseusModel(tiny_model(), 2, factory=bare_linear)


def test_a_narrower_width_not_below_the_predecessors_is_refused(family):
    model = tiny_model(family)
    source = find_layer_stack(model).layers[0]
    for width in (37, 50):
        with pytest.raises(ValueError, match=f"intermediate_size={width} must be at least 1 and below .* 37"):
            copied_layer([source], source, model.config, intermediate_size=width)


def test_shape_fields_name_each_familys_widths(family):
    config = tiny_model(family).config
    assert shape_of(config) == {"layers": 4, "hidden_size": 32, "intermediate_size": 37}


@pytest.fixture
def base_overrides(tiny_base, glue_dir, tmp_path):
    return tiny_run_overrides(tiny_base, glue_dir, tmp_path)


def test_a_run_with_narrower_successors_reports_their_shape(base_overrides, tmp_path):
    results = run(compose_config(*base_overrides, f"theseus.successor.intermediate_size={WIDTH}"))
    assert results["successor"]["shape"] == {"layers": 2, "hidden_size": 32, "intermediate_size": WIDTH}
    assert results["predecessor"]["shape"]["intermediate_size"] > WIDTH
    assert results["successor"]["format"] == "transformers" and results["failed_steps"] == {}
    assert results["settings"]["theseus.successor.importance"] == "activation"  # the default
    exported = load_successor(tmp_path / "run" / "successor")
    layer_params = sum(p.numel() for p in find_layer_stack(exported).layers.parameters())
    assert results["params"]["successor_layers"] == layer_params < results["params"]["predecessor_layers"]
    card = (tmp_path / "run" / "successor" / "README.md").read_text()
    assert f"| feed-forward width | {results['predecessor']['shape']['intermediate_size']} | {WIDTH} |" in card


def test_a_run_chooses_neurons_by_their_activity_on_its_first_training_rows(base_overrides, tmp_path):
    settings = (f"theseus.successor.intermediate_size={WIDTH}", "theseus.successor.importance=activation")
    # The first run fine-tunes the predecessor; the second finds it cached, so only calibration reads the data.
    for folder in ("first", "second"):
        results = run(compose_config(*base_overrides, *settings, f"paths.output_dir={tmp_path / folder}"))
        assert results["settings"]["theseus.successor.importance"] == "activation" and results["failed_steps"] == {}
        assert results["successor"]["shape"]["intermediate_size"] == WIDTH
    assert results["predecessor"]["origin"] == "cache"


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
    assert resumed["resumed_from"] and resumed["steps"] == 6
    whole = run(compose_config(*base_overrides, *narrower, f"paths.output_dir={tmp_path / 'whole'}"))
    assert resumed["successor"]["shape"] == whole["successor"]["shape"]
    after_resume, uninterrupted = (load_successor(r["successor_dir"]).state_dict() for r in (resumed, whole))
    assert after_resume.keys() == uninterrupted.keys()
    assert all(torch.equal(after_resume[name], uninterrupted[name]) for name in uninterrupted)


def test_a_run_with_a_custom_factory_ships_a_pickled_successor(base_overrides, tmp_path):
    target = "theseus.successor._target_=theseus_pl.core.successors.copied.feed_forward_block"
    results = run(compose_config(*base_overrides, target))
    assert results["successor"]["format"] == "pickled module" and results["failed_steps"] == {}
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["successor"]["score"] == results["successor"]["score"]
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
