"""A decoder successor as GGUF for llama.cpp: written, read back by transformers with its logits and tokenizer, the
tokenizer of a GGUF predecessor copied exactly, and the exports that cannot be made refused in words."""

import pytest
import torch
from decoder_models import tiny_bpe_tokenizer, tiny_decoder, tiny_lm_tokenizer
from transformers import AutoTokenizer

from theseus_pl.deployment.gguf_export import GGUFExportError, export_gguf, gguf_logit_check, gguf_problems
from theseus_pl.deployment.gguf_reading import gguf_parsed_once, read_gguf_model

pytestmark = pytest.mark.quick

gguf = pytest.importorskip("gguf", reason="the lm extra (gguf) is part of the dev install")


@pytest.fixture
def tiny_bpe_llama(tmp_path):
    """A tiny Llama with untied output (both output paths of the writer are covered by the families' configs)
    and a byte-level BPE tokenizer, saved as a successor folder is."""
    tokenizer = tiny_bpe_tokenizer()
    model = tiny_decoder("llama", vocab_size=len(tokenizer), tie_word_embeddings=False)
    folder = tmp_path / "successor"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model, tokenizer


@pytest.mark.parametrize(("kind", "largest_diff"), [("f32", 1e-5), ("f16", 2e-3), ("q8_0", 5e-2)])
def test_a_tiny_llama_written_as_gguf_loads_back_with_its_logits_within_the_types_tolerance(
    tiny_bpe_llama, kind, largest_diff
):
    folder, model, tokenizer = tiny_bpe_llama
    path = export_gguf(folder, folder / "gguf" / f"model.{kind}.gguf", kind)
    windows = torch.tensor([tokenizer("the president said the economy and the jobs")["input_ids"][:12]] * 2)
    with torch.no_grad():
        check = gguf_logit_check(model(windows).logits, path, windows)
    assert check.max_logit_diff < largest_diff  # the query/key rows reordered as transformers' reader undoes
    assert check.agreement == 1.0 and check.perplexity == pytest.approx(check.reference_perplexity, rel=1e-2)


def test_one_parse_serves_a_gguf_files_model_and_tokenizer_and_gguf_is_left_as_it_was(tiny_bpe_llama, monkeypatch):
    """transformers parsed the file for the config, the weights and the tokenizer, and built the architecture's whole
    name map at every module it walked: SmolLM2's conversion took 16.7-17.3 s, 6.7-6.9 s without them."""
    folder, model, tokenizer = tiny_bpe_llama
    path = export_gguf(folder, folder / "model.f32.gguf", "f32")
    calls = {"GGUFReader": [], "get_tensor_name_map": []}

    def counted(name):
        original = getattr(gguf, name)

        def call(*args):
            calls[name].append(args)
            return original(*args)

        return call

    for name in calls:
        monkeypatch.setattr(gguf, name, counted(name))
    wrappers = {name: getattr(gguf, name) for name in calls}
    with gguf_parsed_once():
        read = read_gguf_model(path)  # a block inside: shares the outer one's parse
        read_tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    assert len(calls["GGUFReader"]) == 1
    assert calls["get_tensor_name_map"] == [(gguf.MODEL_ARCH.LLAMA, model.config.num_hidden_layers)]
    assert {name: getattr(gguf, name) for name in calls} == wrappers
    assert torch.equal(read.lm_head.weight, model.lm_head.weight)  # f32, untied: every weight found by its name
    assert read_tokenizer("the nation said")["input_ids"] == tokenizer("the nation said")["input_ids"]


def test_the_smaller_types_write_smaller_files(tiny_bpe_llama):
    folder, _, _ = tiny_bpe_llama
    sizes = [export_gguf(folder, folder / f"{kind}.gguf", kind).stat().st_size for kind in ("f32", "f16", "q8_0")]
    assert sizes[0] > sizes[1] > sizes[2]


def test_the_tokenizer_and_chat_template_travel_with_the_weights(tiny_bpe_llama):
    folder, _, tokenizer = tiny_bpe_llama
    path = export_gguf(folder, folder / "gguf" / "model.f16.gguf", "f16")
    back = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    text = "the nation said: jobs, 2020 school!"
    assert back(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert back.decode(back(text)["input_ids"]) == text
    assert back.eos_token == "<|endoftext|>"
    fields = gguf.GGUFReader(path).fields
    assert fields["tokenizer.chat_template"].contents() == tokenizer.chat_template


def test_the_tokenizer_of_a_gguf_predecessor_is_copied_field_by_field(tiny_bpe_llama, tmp_path):
    folder, _, _ = tiny_bpe_llama
    source = export_gguf(folder, tmp_path / "predecessor.gguf", "f32")
    copied = export_gguf(folder, tmp_path / "successor.gguf", "q8_0", tokenizer_gguf=source)

    def tokenizer_fields(path):
        return {name: field.contents() for name, field in gguf.GGUFReader(path).fields.items()
                if name.startswith("tokenizer.")}  # fmt: skip

    assert tokenizer_fields(copied) == tokenizer_fields(source) and "tokenizer.ggml.merges" in tokenizer_fields(source)


def test_an_export_that_cannot_be_made_is_refused_in_words(tmp_path):
    assert gguf_problems("llama", ["f16", "q8_0"]) == []
    family, kind = gguf_problems("qwen2", ["f16", "q3_k"])
    assert "knows the llama family, not 'qwen2'" in family and "convert_hf_to_gguf.py" in family
    assert kind.startswith("deploy.gguf: q3_k is not a type") and "q8_0" in kind
    folder = tmp_path / "word_level"
    tiny_decoder("llama").save_pretrained(folder)
    tiny_lm_tokenizer().save_pretrained(folder)
    with pytest.raises(GGUFExportError, match=r"not a byte-level BPE tokenizer\.json"):
        export_gguf(folder, tmp_path / "model.gguf", "f16")
    qwen = tmp_path / "qwen"
    tiny_decoder("qwen2").save_pretrained(qwen)
    with pytest.raises(GGUFExportError, match="not 'qwen2'"):
        export_gguf(qwen, tmp_path / "qwen.gguf", "f16")


def test_the_predecessors_gguf_file_is_cached_by_its_folders_contents_not_its_name(tmp_path):
    """Sharded weights were keyed by the folder's name: two predecessors in folders of one name shared one file, and
    the second's llama.cpp speed-ups and perplexity were taken against the first."""
    from theseus_pl.deployment.gguf_stage import _predecessor_gguf

    tokenizer = tiny_bpe_tokenizer()
    files = []
    for where, layers in (("a", 4), ("b", 2)):
        folder = tmp_path / where / "predecessor"
        tiny_decoder("llama", vocab_size=len(tokenizer), num_hidden_layers=layers).save_pretrained(
            folder, max_shard_size="20KB"
        )
        tokenizer.save_pretrained(folder)
        files.append(_predecessor_gguf(folder, "f16", None, tmp_path / "cache"))
    assert [gguf.GGUFReader(file).fields["llama.block_count"].contents() for file in files] == [4, 2]


def test_a_head_width_of_its_own_is_written_and_a_scaled_rope_is_refused(tmp_path):
    """Without llama.cpp's key and value lengths, a Llama whose head_dim is not hidden/heads wrote a file llama.cpp
    refused to load; a scaled RoPE (Llama 3.1's llama3) was written as plain RoPE, its logits off in llama.cpp while
    transformers' read-back, scaling it, agreed."""
    tokenizer = tiny_bpe_tokenizer()
    wide = tmp_path / "wide_heads"
    tiny_decoder("llama", vocab_size=len(tokenizer), head_dim=16).save_pretrained(wide)
    tokenizer.save_pretrained(wide)
    fields = gguf.GGUFReader(export_gguf(wide, wide / "model.gguf", "f32")).fields
    assert fields["llama.attention.key_length"].contents() == fields["llama.attention.value_length"].contents() == 16
    scaled = tmp_path / "scaled_rope"
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}  # fmt: skip
    tiny_decoder("llama", vocab_size=len(tokenizer), rope_parameters=rope).save_pretrained(scaled)
    tokenizer.save_pretrained(scaled)
    with pytest.raises(GGUFExportError, match=r"its RoPE is scaled \(llama3\), which this GGUF writer does not write"):
        export_gguf(scaled, scaled / "model.gguf", "f32")
    assert not (scaled / "model.gguf").exists()
