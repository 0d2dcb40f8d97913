import pytest
import torch
from conftest import FAMILIES as TINY_FAMILIES
from conftest import tiny_inputs, tiny_model
from torch import nn
from transformers import AutoModelForSequenceClassification, ErnieConfig

from theseus_pl.core import families
from theseus_pl.core.families import (
    FAMILIES,
    Attention,
    Family,
    FeedForward,
    attention_of,
    feed_forward_of,
    find_layer_stack,
    register_family,
)
from theseus_pl.core.io import load_successor
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors import successor_factory

pytestmark = pytest.mark.quick


def test_every_supported_family_is_known():
    assert set(TINY_FAMILIES) <= set(FAMILIES)


def test_finds_the_layer_list_of_each_family(family):
    model = tiny_model(family)
    stack = find_layer_stack(model)
    assert isinstance(stack.layers, nn.ModuleList)
    assert len(stack.layers) == 4
    assert model.get_submodule(stack.path) is stack.layers


def _ernie():
    torch.manual_seed(0)
    config = ErnieConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=37
    )
    return AutoModelForSequenceClassification.from_config(config)


def test_unknown_family_names_the_known_ones_and_the_candidates():
    with pytest.raises(ValueError) as error:
        find_layer_stack(_ernie())
    message = str(error.value)
    assert "'ernie'" in message
    assert "bert, deberta-v2, distilbert" in message
    assert "layers_path=" in message
    assert "ernie.encoder.layer" in message


def test_a_named_layer_path_makes_any_encoder_work(tmp_path):
    model = _ernie().eval()
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
        theseus = TheseusModel(model, 2, layers_path="ernie.encoder.layer").eval()
        assert torch.allclose(theseus([False, False], **inputs).logits, expected, atol=1e-6)
        theseus.export(tmp_path)
        reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
        assert torch.allclose(reloaded(**inputs).logits, theseus(**inputs).logits, atol=1e-5)


@pytest.mark.parametrize("path", ["bert.encoder.nothing", "bert.missing.layer", "bert.pooler"])
def test_a_wrong_layer_path_is_refused_with_candidates(path):
    with pytest.raises(ValueError, match=r"layers_path='.*'.*Candidates in this model: bert\.encoder\.layer"):
        find_layer_stack(tiny_model("bert"), path)


def test_a_family_registered_in_one_place_is_found_by_every_lookup(monkeypatch, tmp_path):
    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))  # registered for this test only
    model = _ernie().eval()
    for lookup in (find_layer_stack, lambda m: feed_forward_of(m.config), lambda m: attention_of(m.config)):
        with pytest.raises(ValueError, match="'ernie'"):
            lookup(model)
    feed_forward = FeedForward("intermediate.dense", "output.dense", "intermediate_size")
    attention = Attention(
        "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
        "attention.output.LayerNorm", "output.LayerNorm", "hidden_size", "num_attention_heads",
    )  # fmt: skip
    register_family("ernie", Family("encoder.layer", feed_forward, attention))
    assert find_layer_stack(model).path == "ernie.encoder.layer"
    assert feed_forward_of(model.config) is feed_forward and attention_of(model.config) is attention
    # Both narrowings read the layouts from that one entry: a 2-layer successor 16 wide with 20 neurons a layer.
    batches = [tiny_inputs(batch_size=4, seed=seed) for seed in range(3)]
    factory = successor_factory(model, batches, intermediate_size=20, hidden_size=16, importance="magnitude")
    theseus = TheseusModel(model, 2, factory=factory).eval()
    assert theseus.compact_config().intermediate_size == 20 and theseus.compact_config().narrow_hidden_size == 16
    with torch.no_grad():
        logits = theseus(**tiny_inputs()).logits
        torch.testing.assert_close(load_successor(theseus.export(tmp_path))(**tiny_inputs()).logits, logits)
