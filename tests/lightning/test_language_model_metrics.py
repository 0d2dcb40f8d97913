"""Held-out language-model metrics against independent computations."""

import math

import pytest
import torch
import torch.nn.functional as F
from decoder_models import tiny_decoder, tiny_token_ids

from theseus_pl.data.language_model import IGNORED
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics

pytestmark = pytest.mark.quick


def _windows(seed: int, padded: int = 0) -> dict[str, torch.Tensor]:
    ids = tiny_token_ids(batch_size=2, length=12, seed=seed)
    labels = ids.clone()
    if padded:
        labels[1, -padded:] = IGNORED
    return {"input_ids": ids, "labels": labels}


def test_perplexity_is_token_weighted_as_the_models_own_loss():
    model = tiny_decoder("llama")
    metrics = LanguageModelMetrics()
    losses, counts = [], []
    with torch.no_grad():
        for seed, padded in ((0, 0), (1, 7)):
            batch = _windows(seed, padded)
            output = model(**batch)
            metrics.update(output.logits, batch["labels"])
            losses.append(float(output.loss))
            counts.append(int((batch["labels"][:, 1:] != IGNORED).sum()))
    expected_nll = sum(loss * count for loss, count in zip(losses, counts, strict=True)) / sum(counts)
    values = metrics.compute()
    assert counts == [22, 15]
    assert values["nll"] == pytest.approx(expected_nll, rel=1e-5)
    assert values["perplexity"] == pytest.approx(math.exp(expected_nll), rel=1e-5)
    assert "kl" not in values


def test_a_perplexity_past_the_largest_float_is_inf_not_an_overflow():
    """A diverged model's huge logits: exp of a mean nll above 709.78 raised OverflowError, and validation crashed."""
    logits = torch.zeros(1, 3, 4)
    logits[..., 3] = 1e4  # all the mass on token 3, never the next one: an nll of 1e4 a token
    metrics = LanguageModelMetrics()
    metrics.update(logits, torch.tensor([[0, 1, 2]]))
    values = metrics.compute()
    assert values["nll"] == pytest.approx(1e4) and values["perplexity"] == math.inf


def test_kl_and_agreement_against_the_reference_model():
    model, reference = tiny_decoder("llama", seed=0), tiny_decoder("llama", seed=1)
    batch = _windows(0, padded=3)
    with torch.no_grad():
        logits, reference_logits = model(**batch).logits, reference(**batch).logits
    metrics = LanguageModelMetrics()
    metrics.update(logits, batch["labels"], reference_logits)
    keep = batch["labels"][:, 1:] != IGNORED
    p, q = reference_logits[:, :-1][keep], logits[:, :-1][keep]
    expected_kl = F.kl_div(q.log_softmax(-1), p.log_softmax(-1), log_target=True, reduction="sum") / len(p)
    expected_agreement = (p.argmax(-1) == q.argmax(-1)).float().mean()
    values = metrics.compute()
    assert values["kl"] == pytest.approx(float(expected_kl), rel=1e-5)
    assert values["agreement"] == pytest.approx(float(expected_agreement))
    same = LanguageModelMetrics()
    same.update(logits, batch["labels"], logits)
    assert same.compute()["kl"] == pytest.approx(0.0, abs=1e-6)
    assert same.compute()["agreement"] == 1.0


def test_no_predicted_token_is_an_error_not_a_perplexity_of_one():
    metrics = LanguageModelMetrics()
    batch = _windows(0)
    metrics.update(torch.zeros(2, 12, 61), torch.full_like(batch["labels"], IGNORED))
    with pytest.raises(ValueError, match="No held-out token"):
        metrics.compute()
