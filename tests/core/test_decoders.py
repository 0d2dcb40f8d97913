"""Progressive module replacing on decoder language models: the wrapped model, its training and its export."""

import pytest
import torch
from decoder_models import DECODER_FAMILIES, tiny_decoder, tiny_token_ids
from transformers import AutoModelForCausalLM

from theseus_pl.core.decoders import is_decoder, new_token_room
from theseus_pl.core.families import FAMILIES
from theseus_pl.core.io import load_successor
from theseus_pl.core.replacing import TheseusModel

pytestmark = pytest.mark.quick


@pytest.fixture(params=DECODER_FAMILIES)
def decoder_family(request: pytest.FixtureRequest) -> str:
    return request.param


def _lm_inputs(length: int = 12) -> dict[str, torch.Tensor]:
    ids = tiny_token_ids(length=length)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def test_every_decoder_family_is_registered_as_a_decoder(decoder_family):
    assert FAMILIES[decoder_family].decoder
    assert is_decoder(tiny_decoder(decoder_family))


def test_all_predecessor_gates_give_the_predecessors_logits_exactly(decoder_family):
    model = tiny_decoder(decoder_family)
    inputs = _lm_inputs()
    with torch.no_grad():
        expected = model(**inputs, use_cache=False).logits
        theseus = TheseusModel(model, 2).eval()
        assert torch.equal(theseus([False, False], **inputs).logits, expected)


def test_all_successor_gates_equal_the_exported_causal_lm(decoder_family, tmp_path):
    theseus = TheseusModel(tiny_decoder(decoder_family), 2).eval()
    inputs = _lm_inputs()
    with torch.no_grad():
        expected = theseus(None, **inputs).logits
    theseus.export(tmp_path / "successor")
    # transformers' own class, and the library's loader (which once gave a classifier with a random head)
    for exported in (
        AutoModelForCausalLM.from_pretrained(tmp_path / "successor").eval(),
        load_successor(tmp_path / "successor"),
    ):
        assert type(exported) is type(theseus.model)
        assert exported.config.num_hidden_layers == 2
        layers = exported.get_submodule(theseus.layers_path)
        assert len(layers) == 2
        with torch.no_grad():
            torch.testing.assert_close(exported(**inputs).logits, expected, rtol=0, atol=1e-5)


def _greedy_without_cache(theseus: TheseusModel, ids: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding by the definition: the whole sequence again for every token, argmax of the last logits."""
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = theseus(None, input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            ids = torch.cat([ids, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids


def test_generate_with_the_cache_equals_greedy_decoding_of_the_wrapped_model(decoder_family):
    theseus = TheseusModel(tiny_decoder(decoder_family), 2).eval()
    prompt = tiny_token_ids(batch_size=1, length=5)
    expected = _greedy_without_cache(theseus, prompt, new_tokens=8)
    compact = theseus.to_compact_model()
    generated = compact.generate(
        prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, min_new_tokens=8, do_sample=False,
        use_cache=True, pad_token_id=0,
    )  # fmt: skip
    assert generated.tolist() == expected.tolist()


def _cache_indices(layers: torch.nn.Module) -> list[int]:
    return [module.layer_idx for module in layers.modules() if isinstance(getattr(module, "layer_idx", None), int)]


def test_successor_layers_never_share_a_cache_index_with_a_predecessor_layer(decoder_family):
    theseus = TheseusModel(tiny_decoder(decoder_family), 2)
    predecessor = {i for block in theseus.blocks for i in _cache_indices(block.predecessor)}
    successors = [sorted(set(_cache_indices(block.successor))) for block in theseus.blocks]
    assert predecessor == {0, 1, 2, 3}
    assert successors == [[4], [5]]
    compact = theseus.to_compact_model()
    assert sorted(set(_cache_indices(compact.get_submodule(theseus.layers_path)))) == [0, 1]


def test_training_on_the_lm_loss_moves_only_the_successor_layers(decoder_family):
    theseus = TheseusModel(tiny_decoder(decoder_family), 2).train()
    frozen = {name: p.detach().clone() for name, p in theseus.named_parameters() if not p.requires_grad}
    trainable = {name: p.detach().clone() for name, p in theseus.named_parameters() if p.requires_grad}
    assert frozen and trainable and all(".successor." in name for name in trainable)
    optimizer = torch.optim.AdamW(theseus.successor_parameters(), lr=1e-2)
    inputs = _lm_inputs()
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        loss = theseus(theseus.sample_gate(0.5, generator), **inputs, labels=inputs["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    after = dict(theseus.named_parameters())
    assert all(torch.equal(after[name], value) for name, value in frozen.items())
    assert any(not torch.equal(after[name], value) for name, value in trainable.items())


@pytest.mark.parametrize("training", [True, False])
def test_the_kv_cache_asked_for_on_the_wrapped_model_is_refused(training):
    theseus = TheseusModel(tiny_decoder("llama"), 2).train(training)
    with pytest.raises(ValueError, match=r"use_cache=True .*to_compact_model\(\)"):
        theseus(None, **_lm_inputs(), use_cache=True)


def test_layers_of_several_attention_types_are_refused():
    model = tiny_decoder("qwen2", layer_types=["full_attention", "sliding_attention"] * 2)
    with pytest.raises(ValueError, match=r"full_attention, sliding_attention.*config.layer_types"):
        TheseusModel(model, 2)


def test_gpt2_attention_scaled_by_layer_index_is_refused():
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx=True"):
        TheseusModel(tiny_decoder("gpt2", scale_attn_by_inverse_layer_idx=True), 2)


def test_an_unregistered_decoder_names_the_layers_path_setting(monkeypatch):
    monkeypatch.delitem(FAMILIES, "llama")
    with pytest.raises(ValueError, match=r"'llama'.*layers_path=.*Candidates in this model: model\.layers"):
        TheseusModel(tiny_decoder("llama"), 2)


def test_an_unregistered_decoder_named_by_its_layers_path_runs_without_the_cache(monkeypatch):
    model = tiny_decoder("llama")
    inputs = _lm_inputs()
    with torch.no_grad():
        expected = model(**inputs, use_cache=False).logits
    monkeypatch.delitem(FAMILIES, "llama")
    theseus = TheseusModel(model, 2, layers_path="model.layers").eval()
    with torch.no_grad():
        assert torch.equal(theseus([False, False], **inputs).logits, expected)


def test_generation_is_kept_within_the_positions_of_a_model_with_learned_position_embeddings():
    gpt2 = tiny_decoder("gpt2")  # 64 learned positions: a token past them is an IndexError
    room = new_token_room(gpt2.config, prompt_tokens=16, wanted=64)
    assert room == 48 and new_token_room(gpt2.config, 16, 20) == 20
    prompt = tiny_token_ids(batch_size=1, length=16)
    with torch.no_grad():
        generated = gpt2.generate(prompt, max_new_tokens=room, min_new_tokens=room, do_sample=False, pad_token_id=0)
    assert generated.shape[1] == 64
