import pytest
import torch
from conftest import FAMILIES, tiny_inputs, tiny_model
from torch import nn
from transformers import AutoModelForSequenceClassification, ErnieConfig

from theseus_pl.core.families import KNOWN_LAYER_PATHS, find_layer_stack
from theseus_pl.core.replacing import TheseusModel


def test_every_supported_family_is_known():
    assert set(FAMILIES) <= set(KNOWN_LAYER_PATHS)


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
