"""The 1.7B experiment a GPU user runs in one command: it composes, its memory is sized by the formula before any
machine is rented, and offline it is refused before any compute, naming what it cannot have."""

import huggingface_hub
import pytest
from app_runs import compose_config
from transformers import LlamaConfig

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.kinds.language_model.run import peak_memory_estimate
from theseus_pl.app.run.pipeline import plan

pytestmark = pytest.mark.quick

EXPERIMENT = "+experiment=smollm2_1b7_curriculum"
# HuggingFaceTB/SmolLM2-1.7B-Instruct's config.json, as the hub serves it (the hub is out of reach here)
SMOLLM2_1B7 = LlamaConfig(
    vocab_size=49_152, hidden_size=2_048, intermediate_size=8_192, num_hidden_layers=24, num_attention_heads=32,
    num_key_value_heads=32, max_position_embeddings=8_192, rms_norm_eps=1e-5, tie_word_embeddings=True,
)  # fmt: skip


def test_the_experiment_is_smollm2_1b7_on_wikitext_on_one_gpu_in_bf16():
    cfg = compose_config(EXPERIMENT)
    assert (cfg.trainer.accelerator, cfg.trainer.devices, cfg.trainer.precision) == ("gpu", 1, "bf16-mixed")
    assert cfg.model.base == "HuggingFaceTB/SmolLM2-1.7B-Instruct" and cfg.model.gguf is None
    assert (cfg.data.hub_dataset, cfg.data.hub_config, cfg.data.window) == (
        "Salesforce/wikitext", "wikitext-103-raw-v1", 512,
    )  # fmt: skip
    assert (cfg.theseus.successor_layers, cfg.trainer.max_steps, cfg.schedule_steps) == (12, 2_000, 1_000)


@pytest.mark.parametrize(
    ("protocol", "low", "high"),
    [("theseus_curriculum", 30, 40), ("shortgpt_healed", 20, 30), ("shortgpt_distilled", 30, 40)],
)
def test_the_memory_formula_sizes_it_for_one_gpu_of_48_gb(protocol, low, high):
    cfg = compose_config(EXPERIMENT, f"+lm_protocol={protocol}")
    gib = peak_memory_estimate(cfg, checked_settings(cfg).method, SMOLLM2_1B7) / 2**30
    assert low < gib < high  # the figures its config's comment states: about 35 GiB, 25 healed, 34 distilled


@pytest.mark.parametrize(
    ("protocol", "low", "high"),
    [("theseus_curriculum", 20, 23), ("shortgpt_healed", 15, 19), ("shortgpt_distilled", 23, 28)],
)
def test_with_activation_checkpointing_the_healed_and_theseus_runs_fit_a_24_gb_gpu(protocol, low, high):
    cfg = compose_config(EXPERIMENT, f"+lm_protocol={protocol}", "activation_checkpointing=true")
    gib = peak_memory_estimate(cfg, checked_settings(cfg).method, SMOLLM2_1B7) / 2**30
    assert low < gib < high  # the decoder guide's figures: about 22, 17 and 26 GiB


def test_offline_it_is_refused_before_any_compute_naming_the_model_and_the_text(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(RunRefused) as refused:
        plan(compose_config(EXPERIMENT))
    problems = refused.value.problems
    assert (
        "model.base='HuggingFaceTB/SmolLM2-1.7B-Instruct' (model and tokenizer): not in the local Hugging Face cache, "
        "and HF_HUB_OFFLINE is set. Fix: model.gguf=FILE (a local GGUF file), or model.base=PATH to a local copy."
    ) in problems
    assert any(
        p.startswith("data.hub_dataset='Salesforce/wikitext': not in the local Hugging Face cache") for p in problems
    )
