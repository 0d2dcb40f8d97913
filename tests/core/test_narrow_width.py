"""Successors narrower than the predecessor's hidden width, between learned projections started by PCA."""

import functools

import pytest
import torch
from conftest import FAMILY_CONFIGS, assert_training_moves_only_successors, tiny_inputs
from narrow_models import CONFIGS, HIDDEN, NEURONS, calibration, narrow_theseus, predecessor
from transformers import AutoModelForSequenceClassification

from theseus_pl.core.families import FAMILIES, find_layer_stack
from theseus_pl.core.io import PICKLED, load_successor
from theseus_pl.core.successors import copied_layer, feed_forward_block
from theseus_pl.core.successors.copied import kept_neurons
from theseus_pl.core.successors.hidden_basis import narrow_start, principal_projection

pytestmark = pytest.mark.quick


@pytest.fixture(params=sorted(CONFIGS))
def narrowable(request: pytest.FixtureRequest) -> str:
    """Every family whose layers can run narrower than the embeddings."""
    return request.param


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
    assert getattr(exported.config, FAMILIES[narrowable].feed_forward.width) == NEURONS


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
    factory = functools.partial(
        copied_layer, intermediate_size=NEURONS, importance="magnitude", hidden_size=HIDDEN, narrow_start=start
    )
    layer = factory([source], source, model.config).layer
    feed_forward = FAMILIES[narrowable].feed_forward
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
    norm = find_layer_stack(model).layers[1].get_submodule(FAMILIES[narrowable].attention.output_norm)
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
