"""Successor modules other than a copied layer: narrower feed-forward networks and a researcher's own factory."""

import copy
import functools

import pytest
import torch
from conftest import assert_training_moves_only_successors, tiny_inputs, tiny_model
from transformers import AutoModelForSequenceClassification

from theseus_pl.core.families import FAMILIES, find_layer_stack, shape_of
from theseus_pl.core.io import PICKLED, load_successor
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors import FeedForwardBlock, copied_layer, feed_forward_block
from theseus_pl.core.successors.activity import neuron_activity
from theseus_pl.core.successors.copied import intermediate_size_problem, neuron_importance

pytestmark = pytest.mark.quick

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
    width = FAMILIES[exported.config.model_type].feed_forward.width
    assert getattr(exported.config, width) == WIDTH and exported.config.num_hidden_layers == 2
    assert not (tmp_path / "successor" / PICKLED).exists()


def test_the_kept_neurons_are_the_most_important_and_keep_their_weights(family):
    model = tiny_model(family)
    layout = FAMILIES[model.config.model_type].feed_forward
    source = find_layer_stack(model).layers[0]
    expand, contract = source.get_submodule(layout.expand), source.get_submodule(layout.contract)
    by_hand = torch.cat([expand.weight, expand.bias[:, None]], 1).norm(dim=1) * contract.weight.norm(dim=0)
    torch.testing.assert_close(neuron_importance(expand, contract), by_hand)
    kept = by_hand.topk(WIDTH).indices.sort().values

    layer = copied_layer([source], source, model.config, intermediate_size=WIDTH, importance="magnitude")
    assert torch.equal(layer.get_submodule(layout.expand).weight, expand.weight[kept])
    assert torch.equal(layer.get_submodule(layout.expand).bias, expand.bias[kept])
    assert torch.equal(layer.get_submodule(layout.contract).weight, contract.weight[:, kept])
    assert torch.equal(layer.get_submodule(layout.contract).bias, contract.bias)


def test_a_narrower_layer_is_the_layer_with_the_dropped_neurons_silenced():
    model = tiny_model().eval()
    source = model.bert.encoder.layer[0]
    layer = copied_layer([source], source, model.config, intermediate_size=WIDTH, importance="magnitude").eval()
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
    layout = FAMILIES[model.config.model_type].feed_forward
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
    with pytest.raises(
        ValueError, match=r"importance='activation' needs the neurons' activity .*successor_factory\(model, batches"
    ):
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

    predecessor = tiny_model()
    layers = find_layer_stack(predecessor).layers
    with pytest.raises(ValueError, match=r"modules built by bare_linear do not run in the model: .*argument"):
        TheseusModel(predecessor, 2, factory=bare_linear)
    # the predecessor as it was given (it was left holding the refused modules, all frozen): it wraps again
    assert find_layer_stack(predecessor).layers is layers
    assert all(parameter.requires_grad for parameter in predecessor.parameters())
    assert len(TheseusModel(predecessor, 2).blocks) == 2


def test_a_narrower_width_not_below_the_predecessors_is_refused(family):
    model = tiny_model(family)
    source = find_layer_stack(model).layers[0]
    for width in (37, 50):
        with pytest.raises(ValueError, match=f"intermediate_size={width} must be at least 1 and below .* 37"):
            copied_layer([source], source, model.config, intermediate_size=width, importance="magnitude")


def test_the_feed_forward_width_rule_is_stated_once_for_library_and_app(family):
    config = tiny_model(family).config
    assert intermediate_size_problem(config, 36) is None
    for width in (0, 37):
        assert intermediate_size_problem(config, width).startswith(
            f"intermediate_size={width} must be at least 1 and below 37: a narrower successor must be below the "
            "predecessor's feed-forward width, 37 ("
        )


def test_shape_fields_name_each_familys_widths(family):
    config = tiny_model(family).config
    assert shape_of(config) == {"layers": 4, "hidden_size": 32, "intermediate_size": 37}
