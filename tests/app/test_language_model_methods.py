"""The decoder methods built from their inputs: Theseus started from ShortGPT's kept layers; one Theseus and one
truncation baseline for both kinds, told apart by their inputs."""

import pytest
import torch
from decoder_models import tiny_decoder, tiny_token_ids

from theseus_pl.app.methods.kind_models import LanguageModels
from theseus_pl.app.methods.language_model import ShortGPT
from theseus_pl.app.methods.method import DEFAULT_SUCCESSOR, MethodInputs, TheseusSettings
from theseus_pl.app.methods.theseus import Theseus
from theseus_pl.app.methods.truncation import FineTuning
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.schedules import ConstantSchedule
from theseus_pl.lightning.baselines import DistillationModule
from theseus_pl.lightning.modules import FineTuningModule

pytestmark = pytest.mark.quick

COPIED_LAYERS = {"_target_": DEFAULT_SUCCESSOR, "importance": "activation"}  # theseus.successor as shipped


def _inputs(folder, init: str) -> MethodInputs:
    ids = [tiny_token_ids(batch_size=2, length=10, seed=seed) for seed in range(2)]
    calibration = [{"input_ids": i, "attention_mask": torch.ones_like(i), "labels": i} for i in ids]
    return MethodInputs(
        predecessor_dir=str(folder), models=LanguageModels(), theseus=TheseusSettings(2, init, successor=COPIED_LAYERS),
        optimizer={"lr": 1e-3}, schedule=ConstantSchedule(0.5, switch_step=10), replacement="constant", seed=1,
        calibration=lambda: calibration,
    )  # fmt: skip


def test_theseus_from_block_influence_starts_as_shortgpts_removal(tmp_path):
    model = tiny_decoder("llama")
    layers = find_layer_stack(model).layers
    with torch.no_grad():  # layers 1 and 2 return their input: the least influence, so ShortGPT removes them
        for index in (1, 2):
            layers[index].self_attn.o_proj.weight.zero_()
            layers[index].mlp.down_proj.weight.zero_()
    model.save_pretrained(tmp_path)
    theseus = Theseus("lm_theseus").build(_inputs(tmp_path, "block_influence")).module.model
    assert theseus.successor_sources == [0, 3]
    assert theseus.module_ranges == [range(0, 3), range(3, 4)]
    shortgpt = ShortGPT("shortgpt").build(_inputs(tmp_path, "bottom")).successor().eval()
    ids = tiny_token_ids(batch_size=2, length=10, seed=5)
    with torch.no_grad():
        expected = shortgpt(input_ids=ids).logits
        assert torch.allclose(theseus.eval()([True, True], input_ids=ids).logits, expected, atol=1e-5)


def test_the_truncation_baseline_of_a_language_model_trains_only_its_decoder_layers(tmp_path):
    tiny_decoder("llama").save_pretrained(tmp_path)
    method = FineTuning("lm_truncation").build(_inputs(tmp_path, "bottom"))
    student = method.successor()
    assert student.config.num_hidden_layers == 2 and method.name == "lm_truncation"
    trained = {name for name, parameter in student.named_parameters() if parameter.requires_grad}
    assert trained and all(".layers." in name for name in trained)  # embeddings, final norm, head: frozen


def test_healing_truncation_and_kd_train_with_the_predecessor_as_teacher_when_alpha_weighs_it_in(tmp_path):
    tiny_decoder("llama").save_pretrained(tmp_path)
    inputs = _inputs(tmp_path, "bottom")
    for method in (ShortGPT("shortgpt_distilled", heal=True, alpha=1.0), FineTuning("kd", alpha=0.5, temperature=2.0)):
        module = method.build(inputs).module
        assert isinstance(module, DistillationModule) and module.hparams.alpha == method.alpha
        teacher_layers = find_layer_stack(module.teacher).layers
        assert len(teacher_layers) == 4 and not any(p.requires_grad for p in module.teacher.parameters())
        assert {name for name, p in module.model.named_parameters() if p.requires_grad} == {
            name for name, _ in module.model.named_parameters() if ".layers." in name
        }  # the student trains its decoder layers only, as without soft targets
    plain = ShortGPT("shortgpt_healed", heal=True).build(inputs).module
    assert isinstance(plain, FineTuningModule) and not isinstance(plain, DistillationModule)
    theseus = Theseus("lm_theseus", alpha=1.0).build(inputs).module
    assert theseus.hparams.alpha == 1.0 and theseus.teacher_logits is not None


def test_a_decoder_stored_in_bf16_trains_and_teaches_in_fp32(tmp_path):
    """transformers 5 loads a checkpoint in its stored dtype, and hub decoders are mostly bf16: every load a run
    trains or scores from is fp32 (autocast decides what runs in bf16)."""
    tiny_decoder("llama").to(torch.bfloat16).save_pretrained(tmp_path)
    inputs = _inputs(tmp_path, "bottom")
    for model in (inputs.predecessor(), inputs.teacher(), FineTuning("lm_truncation").build(inputs).successor()):
        assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}
