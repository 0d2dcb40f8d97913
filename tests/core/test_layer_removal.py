"""The layer-removal baselines' choices (ShortGPT, LLM-Streamline) and the model without the removed layers."""

import pytest
import torch
from decoder_models import DECODER_FAMILIES, tiny_decoder, tiny_token_ids
from transformers import AutoModelForCausalLM

from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import (
    block_influence,
    keep_layers,
    layers_kept_by_influence,
    least_influential,
    most_similar_block,
)

pytestmark = pytest.mark.quick


def _batches(count: int = 2) -> list[dict[str, torch.Tensor]]:
    batches = []
    for seed in range(count):
        ids = tiny_token_ids(batch_size=2, length=10, seed=seed)
        batches.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids})
    return batches


def _make_identity(model, index: int) -> None:
    """Zero what a Llama layer adds to the residual stream: the layer returns its input."""
    layer = find_layer_stack(model).layers[index]
    with torch.no_grad():
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()


def test_block_influence_ranks_a_planted_identity_layer_first():
    model = tiny_decoder("llama")
    _make_identity(model, 2)
    influence = block_influence(model, _batches())
    assert influence.shape == (4,)
    assert influence[2] == pytest.approx(0.0, abs=1e-6)
    assert (influence[[0, 1, 3]] > 1e-3).all()
    assert least_influential(influence, 1) == [2]


def test_the_layers_shortgpt_keeps_leave_out_the_planted_identity_layers():
    model = tiny_decoder("llama")
    _make_identity(model, 1)
    _make_identity(model, 3)
    assert layers_kept_by_influence(model, _batches(), 2) == [0, 2]


def test_least_influential_keeps_at_least_one_layer():
    assert least_influential(torch.tensor([0.3, 0.1, 0.2, 0.4]), 2) == [1, 2]
    with pytest.raises(ValueError, match="keep at least one"):
        least_influential(torch.tensor([0.3, 0.1]), 2)


def test_the_most_similar_block_is_the_run_of_planted_identity_layers():
    model = tiny_decoder("llama")
    _make_identity(model, 1)
    _make_identity(model, 2)
    assert most_similar_block(model, _batches(), length=2) == 1


@pytest.mark.parametrize("family", DECODER_FAMILIES)
def test_the_model_without_removed_layers_is_a_plain_checkpoint_of_fewer_layers(family, tmp_path):
    model = tiny_decoder(family)
    ids = tiny_token_ids()
    before = {name: p.clone() for name, p in model.named_parameters()}
    compact = keep_layers(model, [0, 3])
    compact.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.num_hidden_layers == 2
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, compact(input_ids=ids).logits, rtol=0, atol=1e-5)
        generated = loaded.generate(ids[:1, :4], max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert generated.shape == (1, 8)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())  # the predecessor unchanged
    assert len(find_layer_stack(model).layers) == 4


def test_identity_layers_removed_leave_the_logits_unchanged():
    model = tiny_decoder("llama")
    _make_identity(model, 1)
    ids = tiny_token_ids()
    with torch.no_grad():
        torch.testing.assert_close(keep_layers(model, [0, 2, 3])(input_ids=ids).logits, model(input_ids=ids).logits)


def test_kept_layers_must_be_ascending_indices():
    with pytest.raises(ValueError, match=r"kept=\[2, 1\] must be ascending"):
        keep_layers(tiny_decoder("llama"), [2, 1])


def test_a_block_longer_than_the_model_is_refused_before_a_forward_pass_leaves_hooks_behind():
    model = tiny_decoder("llama").train()
    with pytest.raises(ValueError, match="A run of 5 layers does not fit a model of 4 layers"):
        most_similar_block(model, _batches(), length=5)
    assert not any(layer._forward_pre_hooks or layer._forward_hooks for layer in find_layer_stack(model).layers)
    assert model.training  # as it was: no pass started
