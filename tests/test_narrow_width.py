"""Successors narrower than the predecessor's hidden width, between learned projections started by PCA."""

import copy
import functools

import pytest
import torch
from conftest import (
    FAMILY_CONFIGS,
    assert_training_moves_only_successors,
    compose_config,
    tiny_inputs,
    tiny_model,
    tiny_run_overrides,
)
from transformers import AutoModelForSequenceClassification, XLMRobertaConfig

from theseus_pl.app.deploy_folder import deploy_model
from theseus_pl.app.methods import successor_factory
from theseus_pl.app.pipeline import run
from theseus_pl.app.preflight import resource_problems
from theseus_pl.app.run_checks import RunRefused
from theseus_pl.app.settings_check import setting_problems
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.io import PICKLED, load_successor
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors.copied import FEED_FORWARDS, copied_layer, feed_forward_block, kept_neurons
from theseus_pl.core.successors.hidden_basis import narrow_start, principal_projection
from theseus_pl.core.successors.narrow_width import ATTENTION_LAYOUTS, NarrowWidthSuccessor
from theseus_pl.deployment.stage import DeploySettings

HIDDEN = 16  # of the tiny models' 32, 4 heads of 4 dimensions where the predecessor's have 8
NEURONS = 20  # of their 37 feed-forward neurons
CONFIGS = {
    **{family: config for family, config in FAMILY_CONFIGS.items() if family in ATTENTION_LAYOUTS},
    "xlm-roberta": XLMRobertaConfig(**FAMILY_CONFIGS["roberta"].to_diff_dict()),
}


@pytest.fixture(params=sorted(CONFIGS))
def narrowable(request: pytest.FixtureRequest) -> str:
    """Every family whose layers can run narrower than the embeddings."""
    return request.param


def predecessor(family: str = "bert") -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_config(copy.deepcopy(CONFIGS[family])).eval()


def calibration() -> list[dict[str, torch.Tensor]]:
    return [tiny_inputs(batch_size=4, seed=seed) for seed in range(3)]


def narrow_theseus(model: torch.nn.Module, modules: int = 4, **settings: object) -> TheseusModel:
    """``model`` as the run builds it with ``theseus.successor.hidden_size=HIDDEN`` and ``settings``."""
    factory = successor_factory({"hidden_size": HIDDEN, "importance": "magnitude", **settings}, model, calibration)
    return TheseusModel(model, modules, factory=factory).eval()


def test_all_predecessor_gates_give_the_predecessors_logits_exactly(narrowable):
    model = predecessor(narrowable)
    expected = model(**tiny_inputs()).logits
    theseus = narrow_theseus(model)
    with torch.no_grad():
        assert torch.equal(theseus([False] * 4, **tiny_inputs()).logits, expected)


def test_the_all_successor_model_is_the_exported_model(narrowable, tmp_path):
    theseus = narrow_theseus(predecessor(narrowable), 2, intermediate_size=NEURONS)
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = theseus(None, **inputs).logits
        folder = theseus.export(tmp_path / "successor")
        exported = load_successor(folder)
        torch.testing.assert_close(exported(**inputs).logits, expected, atol=1e-5, rtol=0)
    assert (folder / PICKLED).is_file()
    first, last = find_layer_stack(exported).layers
    assert first.projection is last.projection  # one pair of projections, shared
    assert (first.enters, first.leaves, last.enters, last.leaves) == (True, False, False, True)
    assert exported.config.narrow_hidden_size == HIDDEN and exported.config.num_hidden_layers == 2
    assert getattr(exported.config, FEED_FORWARDS[narrowable].width) == NEURONS


def test_consecutive_successors_pass_narrow_states_and_project_only_where_a_run_begins_and_ends():
    theseus = narrow_theseus(predecessor())
    widths = {}
    for index, block in enumerate(theseus.blocks):
        block.successor.layer.register_forward_pre_hook(
            lambda _, args, index=index: widths.__setitem__(index, args[0].shape[-1])
        )
        block.predecessor[0].register_forward_pre_hook(
            lambda _, args, index=index: widths.__setitem__(index, args[0].shape[-1])
        )
    with torch.no_grad():
        theseus([True, True, False, True], **tiny_inputs())
    assert widths == {0: HIDDEN, 1: HIDDEN, 2: 32, 3: HIDDEN}
    flags = [(b.successor.enters, b.successor.leaves) for b in theseus.blocks]
    assert flags[0] == (True, False) and flags[1] == (False, True) and flags[3] == (True, True)


def test_the_projections_start_as_the_principal_directions_of_the_predecessors_hidden_states():
    model = predecessor()
    batches = calibration()
    projection = principal_projection(model, batches, HIDDEN)
    with torch.no_grad():
        states = []
        for batch in batches:  # the embeddings' output, each layer's: every state the layer stack passes on
            hidden = model(**batch, output_hidden_states=True).hidden_states
            states += [layer_states[batch["attention_mask"].bool()] for layer_states in hidden]
        states = torch.cat(states).double()
        centred = states - states.mean(dim=1, keepdim=True)  # each token about its own mean, as a LayerNorm takes it
        discarded = torch.linalg.eigvalsh(centred.T @ centred / len(centred))[:-HIDDEN].sum()
        directions = projection.down.weight.double()
        lost = (centred - centred @ directions.T @ directions).square().sum(dim=1).mean()
        torch.testing.assert_close(lost, discarded, rtol=1e-3, atol=1e-5)  # what PCA loses, and no more
        torch.testing.assert_close(directions @ directions.T, torch.eye(HIDDEN, dtype=torch.float64), rtol=0, atol=1e-5)
        torch.testing.assert_close(directions.sum(dim=1), torch.zeros(HIDDEN, dtype=torch.float64), rtol=0, atol=1e-5)
        random = torch.linalg.qr(torch.randn(32, HIDDEN, dtype=torch.float64)).Q
        assert lost < (centred - centred @ random @ random.T).square().sum(dim=1).mean()
        mean = states.mean(dim=0).float()  # the average state passes down and up unchanged
        torch.testing.assert_close(projection.up(projection.down(mean)), mean, rtol=0, atol=1e-5)


def test_a_narrow_layer_reads_and_writes_the_hidden_state_through_the_projections(narrowable):
    model = predecessor(narrowable)
    source = find_layer_stack(model).layers[0]
    start = narrow_start(model, calibration(), HIDDEN)
    projection = start.projection
    factory = functools.partial(copied_layer, intermediate_size=NEURONS, hidden_size=HIDDEN, narrow_start=start)
    layer = factory([source], source, model.config).layer
    feed_forward = FEED_FORWARDS[narrowable]
    expand, contract = source.get_submodule(feed_forward.expand), source.get_submodule(feed_forward.contract)
    kept = kept_neurons(expand, contract, NEURONS, "magnitude")  # the most important by magnitude
    z, activations = torch.randn(5, HIDDEN), torch.randn(5, NEURONS)
    full_activations = torch.zeros(5, expand.out_features).index_copy(1, kept, activations)
    with torch.no_grad():
        narrow_expand, narrow_contract = (
            layer.get_submodule(feed_forward.expand),
            layer.get_submodule(feed_forward.contract),
        )
        torch.testing.assert_close(narrow_expand(z), expand(projection.up(z))[:, kept], atol=1e-5, rtol=1e-5)
        written = contract(full_activations) @ projection.down.weight.T
        torch.testing.assert_close(narrow_contract(activations), written, atol=1e-5, rtol=1e-5)


def test_each_head_keeps_its_dimensions_whose_scores_weigh_most():
    model = predecessor()
    source = find_layer_stack(model).layers[0]
    start = narrow_start(model, calibration(), HIDDEN)
    projection = start.projection
    narrow = copied_layer([source], source, model.config, hidden_size=HIDDEN, narrow_start=start).layer
    query, key = source.attention.self.query, source.attention.self.key
    score = (query.weight.norm(dim=1) * key.weight.norm(dim=1)).view(4, 8)
    kept = torch.cat([head * 8 + score[head].topk(4).indices.sort().values for head in range(4)])
    z = torch.randn(5, HIDDEN)
    with torch.no_grad():
        expected = key(projection.up(z))[:, kept]
        torch.testing.assert_close(narrow.attention.self.key(z), expected, atol=1e-5, rtol=1e-5)
        # the queries scaled by sqrt(4 / 8): scores summed over half the dimensions, divided by sqrt(4), not sqrt(8)
        scaled = query(projection.up(z))[:, kept] * 0.5**0.5
        torch.testing.assert_close(narrow.attention.self.query(z), scaled, atol=1e-5, rtol=1e-5)


def test_each_narrow_layernorm_is_the_least_squares_fit_of_its_predecessors_seen_through_the_projection(narrowable):
    model = predecessor(narrowable)
    norm = find_layer_stack(model).layers[1].get_submodule(ATTENTION_LAYOUTS[narrowable].output_norm)
    received = []
    hook = norm.register_forward_pre_hook(lambda _, args: received.append(args[0]))
    batches = calibration()
    with torch.no_grad():
        for batch in batches:
            model(**batch)
    hook.remove()
    start = narrow_start(model, batches, HIDDEN)
    weight, bias = start.norms[norm]
    masks = [batch["attention_mask"].bool() for batch in batches]
    given = torch.cat([states[mask] for states, mask in zip(received, masks, strict=True)])
    with torch.no_grad():
        down = start.projection.down
        normalised = torch.nn.functional.layer_norm(down(given), (HIDDEN,), eps=norm.eps)
        residual = normalised * weight + bias - down(norm(given))
    # least squares: the residual has no mean and no correlation with the normalised input, coordinate by coordinate
    torch.testing.assert_close(residual.mean(0), torch.zeros(HIDDEN), atol=1e-4, rtol=0)
    torch.testing.assert_close((residual * normalised).mean(0), torch.zeros(HIDDEN), atol=1e-4, rtol=0)
    assert residual.square().mean() < (normalised - down(norm(given))).square().mean()  # better than none


def test_training_narrow_successors_leaves_every_frozen_parameter_bit_identical_and_trains_the_projections():
    theseus = narrow_theseus(predecessor(), 2).train()
    assert len(theseus.successor_parameters()) == len({id(p) for p in theseus.successor_parameters()})
    assert_training_moves_only_successors(theseus, theseus.successor_parameters())
    assert any("projection.down" in name for name, _ in theseus.named_parameters())


def test_a_narrow_width_successor_deploys_to_onnx_and_int8_beside_its_predecessor(tmp_path, tiny_tokenizer, glue_dir):
    model = tiny_model("bert", num_labels=2)
    model.save_pretrained(tmp_path / "predecessor")
    folder = narrow_theseus(model, 2).export(tmp_path / "successor", tiny_tokenizer)
    settings = DeploySettings(batch_sizes=(1,), repeats=1, sequence_length=12, quantize="int8")
    block = deploy_model(folder, settings, task="RTE", glue_dir=str(glue_dir), predecessor_dir=tmp_path / "predecessor")
    assert (folder / block["onnx"]).is_file() and block["max_abs_diff"] <= block["tolerance"]
    assert (folder / block["onnx_int8"]).is_file()
    sizes = block["size_mb"]
    assert sizes["pytorch_successor"] == pytest.approx((folder / PICKLED).stat().st_size / 1e6)
    assert block["smaller_than_predecessor"]["pytorch_successor"] > 1


@pytest.mark.parametrize(
    ("width", "message"),
    [(32, "below the predecessor's 32"), (40, "below the predecessor's 32"), (18, "multiple of .* 4 attention heads")],
)
def test_a_hidden_size_the_layers_cannot_take_is_refused(width, message):
    with pytest.raises(ValueError, match=message):
        principal_projection(predecessor(), calibration(), width)


def test_a_family_whose_layers_cannot_be_narrowed_is_refused_by_name():
    torch.manual_seed(0)
    deberta = AutoModelForSequenceClassification.from_config(FAMILY_CONFIGS["deberta-v2"])
    with pytest.raises(ValueError, match=r"model type 'deberta-v2' cannot be narrowed .* relative position"):
        principal_projection(deberta, calibration(), HIDDEN)


def test_factories_without_the_projections_refuse_a_hidden_size():
    model = predecessor()
    source = find_layer_stack(model).layers[0]
    with pytest.raises(ValueError, match="hidden_size=16 needs the projections"):
        copied_layer([source], source, model.config, hidden_size=HIDDEN)
    start = narrow_start(model, calibration(), HIDDEN)
    with pytest.raises(ValueError, match="feed_forward_block runs at the predecessor's hidden width"):
        feed_forward_block([source], source, model.config, hidden_size=HIDDEN, narrow_start=start)


@pytest.fixture
def base_overrides(tiny_base, glue_dir, tmp_path):
    return tiny_run_overrides(tiny_base, glue_dir, tmp_path)


def test_a_run_with_narrow_width_successors_ships_them_pickled_and_reports_their_shape(base_overrides, tmp_path):
    results = run(compose_config(*base_overrides, f"theseus.successor.hidden_size={HIDDEN}"))
    assert results["failed_steps"] == {} and results["successor"]["format"] == "pickled module"
    assert results["successor"]["shape"] == {"layers": 2, "hidden_size": HIDDEN, "intermediate_size": 37}
    assert results["settings"]["theseus.successor.hidden_size"] == HIDDEN
    exported = load_successor(results["successor_dir"])
    assert all(isinstance(layer, NarrowWidthSuccessor) for layer in find_layer_stack(exported).layers)
    assert results["params"]["successor_layers"] < results["params"]["predecessor_layers"] / 2
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
