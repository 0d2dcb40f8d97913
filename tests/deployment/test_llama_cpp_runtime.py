"""GGUF files as llama.cpp runs them: the logits it computes from an exported file and its timing of two files.

llama.cpp's binding is an optional extra built from source (a C++ compiler, about 6 minutes on 2 cores), so
these tests skip where it is not installed: ``pip install "theseus_pl[llama-cpp]"`` runs them.
"""

import numpy as np
import pytest
import torch
from decoder_models import tiny_bpe_tokenizer, tiny_decoder

from theseus_pl.deployment.gguf_export import export_gguf
from theseus_pl.deployment.gguf_stage import deploy_gguf
from theseus_pl.deployment.llama_cpp_runtime import llama_cpp_perplexity, llama_cpp_problem, llama_cpp_speed

pytestmark = pytest.mark.quick

llama_cpp = pytest.importorskip("llama_cpp", reason='llama.cpp\'s binding: pip install "theseus_pl[llama-cpp]"')


def _saved(folder, layers):
    tokenizer = tiny_bpe_tokenizer()
    model = tiny_decoder("llama", vocab_size=len(tokenizer), num_hidden_layers=layers)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def test_llama_cpp_computes_the_pytorch_models_logits_from_the_exported_file(tmp_path):
    model, tokenizer = _saved(tmp_path / "model", 4)
    path = export_gguf(tmp_path / "model", tmp_path / "model.f32.gguf", "f32")
    ids = tokenizer("the president said the economy and the jobs of the nation")["input_ids"]
    runner = llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False)
    try:
        runner.eval(ids)
        logits = np.array(runner.scores[: len(ids)])
    finally:
        runner.close()
    with torch.no_grad():
        reference = model(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(logits - reference).max() < 1e-3  # the rotary rows in llama.cpp's layout


def test_two_gguf_files_are_timed_in_turn_at_prefill_and_decode(tmp_path):
    assert llama_cpp_problem() is None
    _saved(tmp_path / "predecessor", 4)
    _, tokenizer = _saved(tmp_path / "successor", 2)
    files = [export_gguf(tmp_path / name, tmp_path / f"{name}.gguf", "f16") for name in ("predecessor", "successor")]
    window = tokenizer("the president said the economy and the jobs of the nation")["input_ids"]
    speed = llama_cpp_speed(*files, window, window[:4], new_tokens=8, repeats=2, threads=1)
    for stage in ("prefill", "decode"):
        assert speed[f"predecessor_{stage}_tokens_per_second"] > 0 and speed[f"successor_{stage}_tokens_per_second"] > 0
        assert speed[f"{stage}_speedup"] > 0


def test_llama_cpp_scores_a_float_file_as_pytorch_does(tmp_path):
    model, tokenizer = _saved(tmp_path / "model", 4)
    path = export_gguf(tmp_path / "model", tmp_path / "model.f32.gguf", "f32")
    windows = torch.tensor([tokenizer("the president said the economy and the jobs of the nation")["input_ids"]] * 2)
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(model(windows).logits[:, :-1].flatten(0, 1), windows[:, 1:].flatten())
    assert llama_cpp_perplexity(path, windows, threads=1) == pytest.approx(float(torch.exp(loss)), rel=1e-4)


def test_the_deploy_stage_times_and_scores_every_type_against_the_predecessor_at_that_type(tmp_path):
    _saved(tmp_path / "predecessor", 4)
    model, tokenizer = _saved(tmp_path / "successor", 2)
    windows = torch.tensor([tokenizer("the president said the economy and the jobs of the nation")["input_ids"]] * 2)
    timing = {"repeats": 1, "new_tokens": 4, "threads": 1}
    rows = deploy_gguf(tmp_path / "successor", model, tmp_path / "predecessor", ["f32", "q8_0"], windows,
                       timing=timing, cache_dir=tmp_path / "cache")  # fmt: skip
    assert [row["type"] for row in rows] == ["f32", "q8_0"]
    for row in rows:
        in_llama_cpp = row["llama_cpp"]
        assert in_llama_cpp["decode_speedup"] > 0 and in_llama_cpp["predecessor_perplexity"] > 1
        assert in_llama_cpp["successor_perplexity"] == pytest.approx(row["perplexity"], rel=0.05)
    assert rows[0]["llama_cpp"]["successor_perplexity"] == pytest.approx(rows[0]["perplexity"], rel=1e-4)
    assert len(list((tmp_path / "cache" / "gguf-export").iterdir())) == 2 + 2  # a predecessor file a type (+ locks)


def test_a_deployment_stopped_midway_leaves_none_of_its_files(tmp_path, monkeypatch):
    """Ctrl-C while the second type was checked left the first type's file, which no row described."""
    from theseus_pl.deployment import gguf_stage

    model, tokenizer = _saved(tmp_path / "successor", 2)
    windows = torch.tensor([tokenizer("the president said the economy")["input_ids"]])
    checked = gguf_stage.gguf_logit_check

    def interrupted_at_the_second(reference, path, windows):
        if path.name == "model.q8_0.gguf":
            raise KeyboardInterrupt
        return checked(reference, path, windows)

    monkeypatch.setattr(gguf_stage, "gguf_logit_check", interrupted_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        deploy_gguf(tmp_path / "successor", model, tmp_path / "successor", ["f32", "q8_0"], windows)
    assert not list((tmp_path / "successor" / "gguf").glob("*.gguf"))
