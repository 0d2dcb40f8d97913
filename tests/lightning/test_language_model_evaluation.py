"""The held-out comparison of a compressed LM with its predecessor."""

import re

import pytest
from decoder_models import InMemoryText, tiny_decoder, tiny_documents, tiny_lm_tokenizer

from theseus_pl.core.layer_removal import keep_layers
from theseus_pl.data.language_model import LanguageModelingDataModule
from theseus_pl.lightning.language_model_evaluation import evaluate_language_model

pytestmark = pytest.mark.quick

SETTINGS = {"accelerator": "cpu", "devices": 1, "enable_model_summary": False}


def _windows(tmp_path) -> LanguageModelingDataModule:
    return LanguageModelingDataModule(
        tiny_lm_tokenizer(), InMemoryText(tiny_documents(count=20)), window=8, batch_size=4, cache_dir=tmp_path
    )


def test_the_predecessor_compared_with_itself_agrees_everywhere(tmp_path):
    model = tiny_decoder("llama")
    values = evaluate_language_model(model, _windows(tmp_path), SETTINGS, reference=model)
    assert values["kl"] == pytest.approx(0.0, abs=1e-6)
    assert values["agreement"] == 1.0
    assert values["perplexity"] > 1


def test_a_shallower_model_is_measured_against_its_predecessor(tmp_path):
    predecessor = tiny_decoder("llama")
    values = evaluate_language_model(keep_layers(predecessor, [0, 1]), _windows(tmp_path), SETTINGS, predecessor)
    alone = evaluate_language_model(predecessor, _windows(tmp_path), SETTINGS)
    assert values["kl"] > 0 and values["agreement"] < 1
    assert set(alone) == {"perplexity", "nll"}
    assert values["reference_perplexity"] == pytest.approx(alone["perplexity"])  # the predecessor's, in the same pass


def test_the_held_out_pass_shows_the_runs_tqdm_bar_and_none_where_bars_are_off(tmp_path, capsys):
    """Lightning's default bar is Rich's where ``rich`` is installed, and it writes nothing to a log file."""
    model = tiny_decoder("llama")
    evaluate_language_model(model, _windows(tmp_path), SETTINGS)
    shown = capsys.readouterr()
    assert re.search(r"Validation DataLoader 0: 100%\|█+\| \d+/\d+ ", shown.out + shown.err)
    evaluate_language_model(model, _windows(tmp_path), SETTINGS | {"enable_progress_bar": False})
    shown = capsys.readouterr()
    assert "Validation" not in shown.out + shown.err
