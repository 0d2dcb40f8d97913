"""Soft targets for a causal language model: the KL between next-token distributions at every predicted position,
padding left out, and a teacher computed for each batch, never remembered."""

import copy

import pytest
import torch
import torch.nn.functional as F
from decoder_models import tiny_decoder, tiny_token_ids

from theseus_pl.core.replacing import TheseusModel
from theseus_pl.data.language_model import IGNORED
from theseus_pl.lightning.baselines import DistillationModule
from theseus_pl.lightning.distillation import TeacherLogits, distillation_loss
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.modules import TheseusModule

pytestmark = pytest.mark.quick


def _padded_labels(ids: torch.Tensor, padding: int) -> torch.Tensor:
    labels = ids.clone()
    labels[:, -padding:] = IGNORED
    return labels


def test_the_loss_is_the_mean_kl_over_predicted_tokens_at_the_temperature():
    generator = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 2, 6, 11, generator=generator)
    labels = _padded_labels(tiny_token_ids(batch_size=2, length=6), padding=2)
    # position t predicts label t + 1: positions 0-2 of each row have a real next token, 3 and 4 padding, 5 nothing
    s, t = student[:, :3].reshape(-1, 11), teacher[:, :3].reshape(-1, 11)
    for temperature in (1.0, 2.0):
        kl = F.softmax(t / temperature, -1) * (F.log_softmax(t / temperature, -1) - F.log_softmax(s / temperature, -1))
        expected = kl.sum(-1).mean() * temperature**2
        assert torch.allclose(distillation_loss(student, teacher, temperature, labels), expected, atol=1e-6)
    assert distillation_loss(teacher, teacher, 1.0, labels).abs() < 1e-6


def test_padding_positions_do_not_count():
    generator = torch.Generator().manual_seed(1)
    student, teacher = torch.randn(2, 2, 6, 11, generator=generator)
    labels = _padded_labels(tiny_token_ids(batch_size=2, length=6), padding=2)
    changed = student.clone()
    changed[:, 3:] = torch.randn(2, 3, 11, generator=generator) * 10  # the positions whose next token is padding
    assert torch.equal(
        distillation_loss(student, teacher, 1.0, labels), distillation_loss(changed, teacher, 1.0, labels)
    )


def test_a_language_models_soft_targets_need_the_labels():
    logits = torch.zeros(1, 4, 5)
    with pytest.raises(ValueError, match="per predicted token"):
        distillation_loss(logits, logits, 1.0)


def test_a_language_models_teacher_logits_are_computed_for_every_batch_and_never_remembered():
    teacher = tiny_decoder("llama")
    calls = []

    def counted(**inputs):
        calls.append(len(inputs["input_ids"]))
        return teacher(**inputs)

    logits = TeacherLogits(counted)
    inputs = {"input_ids": tiny_token_ids(), "attention_mask": torch.ones(2, 12, dtype=torch.long)}
    first = logits(inputs)
    second = logits(inputs)
    assert calls == [2, 2] and not logits.known  # the same rows twice: the teacher ran twice, nothing was kept
    assert first.shape == (2, 12, teacher.config.vocab_size) and torch.equal(first, second)


def _batch(seed: int = 3) -> dict[str, torch.Tensor]:
    ids = tiny_token_ids(batch_size=2, length=12, seed=seed)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": _padded_labels(ids, padding=3)}


def test_healing_with_alpha_one_trains_on_the_predecessors_soft_targets_alone():
    predecessor = tiny_decoder("llama")
    student = copy.deepcopy(predecessor)
    module = DistillationModule(student, predecessor, LanguageModelMetrics(), alpha=1.0, temperature=2.0)
    batch = _batch()
    loss = module.training_step(batch, 0)
    assert loss.abs() < 1e-6  # the student is still the teacher: nothing to learn from its soft targets
    with torch.no_grad():
        student.model.layers[0].mlp.down_proj.weight.add_(0.5)
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    with torch.no_grad():
        expected = distillation_loss(student(**inputs).logits, predecessor(**inputs).logits, 2.0, batch["labels"])
    assert torch.allclose(module.training_step(batch, 0), expected, atol=1e-5)


def test_theseus_on_a_language_model_distils_from_the_predecessor_inside_it():
    model = TheseusModel(tiny_decoder("llama"), successor_layers=2, init="bottom")
    module = TheseusModule(model, LanguageModelMetrics(), alpha=0.5, temperature=1.0)
    module.replacement_rate = 1.0
    batch = _batch()
    loss = module.training_step(batch, 0)
    gate = module.last_gate
    with torch.no_grad():
        output = model(gate, **batch)
        teacher = model([False, False], **{key: value for key, value in batch.items() if key != "labels"}).logits
        expected = 0.5 * distillation_loss(output.logits, teacher, 1.0, batch["labels"]) + 0.5 * output.loss
    assert torch.allclose(loss, expected, atol=1e-5)
    assert not module.teacher_logits.known  # per batch, not per row


def test_theseus_given_a_teacher_of_its_own_distils_from_it_and_never_trains_it():
    model = TheseusModel(tiny_decoder("llama"), successor_layers=2, init="bottom")
    teacher = tiny_decoder("llama", seed=5)  # another model than the predecessor inside: the adapted one, say
    module = TheseusModule(model, LanguageModelMetrics(), alpha=1.0, temperature=2.0, teacher=teacher)
    module.train()
    modes = []
    teacher.register_forward_pre_hook(lambda _, args: modes.append((teacher.training, torch.is_grad_enabled())))
    module.replacement_rate = 1.0
    batch = _batch()
    loss = module.training_step(batch, 0)
    assert modes == [(False, False)] and teacher.training  # called in eval mode, never left there (Lightning warns)
    assert not any(parameter.requires_grad for parameter in teacher.parameters())
    with torch.no_grad():
        output = model(module.last_gate, **batch)
        soft = teacher(**{key: value for key, value in batch.items() if key != "labels"}).logits
        expected = distillation_loss(output.logits, soft, 2.0, batch["labels"])
    assert torch.allclose(loss, expected, atol=1e-5)
    loss.backward()
    assert all(parameter.grad is None for parameter in teacher.parameters())
    with pytest.raises(ValueError, match="alpha=0"):  # no soft targets: refused, not dropped in silence
        TheseusModule(model, LanguageModelMetrics(), alpha=0.0, teacher=teacher)
