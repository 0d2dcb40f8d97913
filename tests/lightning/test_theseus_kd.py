"""Theseus with its predecessor's logits (``TheseusModule(alpha=...)``, ``method=theseus_kd``): alpha 0 is the
paper's Theseus, alpha 1 trains on soft targets alone, and the teacher runs once per training row."""

import pytest
import torch
from conftest import tiny_loader, tiny_model
from test_modules import make_trainer

from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ConstantSchedule
from theseus_pl.core.settings import SettingsError
from theseus_pl.lightning import distillation
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.distillation import PredecessorTeacher, distillation_loss
from theseus_pl.lightning.modules import TheseusModule

pytestmark = pytest.mark.quick


def module(**settings):
    return TheseusModule(TheseusModel(tiny_model(), 2), lr=1e-3, seed=7, **settings)


def trained(theseus, tmp_path, steps=6):
    """The module's parameters after ``steps`` steps at p = 0.5 (some gates replace nothing, others everything)."""
    make_trainer(tmp_path, steps, replacement_callbacks(ConstantSchedule(0.5, 4))).fit(theseus, tiny_loader())
    return {name: parameter.detach().clone() for name, parameter in theseus.named_parameters()}


def test_alpha_zero_is_the_papers_theseus_and_never_runs_the_teacher(tmp_path):
    paper, mixed = module(), module(alpha=0.0, temperature=3.0)
    assert mixed.teacher_logits is None
    start = {name: parameter.detach().clone() for name, parameter in paper.named_parameters()}
    torch.manual_seed(0)  # the same dropout draws
    expected = trained(paper, tmp_path / "paper")
    torch.manual_seed(0)
    got = trained(mixed, tmp_path / "mixed")
    assert any(not torch.equal(expected[name], start[name]) for name in start)  # training moved something
    assert all(torch.equal(got[name], value) for name, value in expected.items())


def test_a_teacher_given_with_alpha_zero_is_refused_rather_than_never_run():
    with pytest.raises(ValueError, match=r"^A teacher is given but alpha=0, .* give alpha above 0"):
        module(teacher=tiny_model(seed=1), temperature=4.0)


def test_alpha_one_trains_on_the_predecessors_soft_targets_alone():
    theseus = module(alpha=1.0, temperature=2.0).eval()  # no dropout: the passes below must agree
    theseus.replacement_rate = 1.0  # every module replaced
    batch = next(iter(tiny_loader()))
    inputs = {key: value for key, value in batch.items() if key != "labels"}
    with torch.no_grad():
        teacher = theseus.model([False, False], **inputs).logits
        student = theseus.model([True, True], **inputs).logits
    loss = theseus.training_step(batch, 0)
    assert loss.item() == pytest.approx(distillation_loss(student, teacher, 2.0).item(), rel=1e-6)
    flipped = {**batch, "labels": batch["labels"].roll(1)}
    assert not torch.equal(flipped["labels"], batch["labels"])
    assert theseus.training_step(flipped, 0).item() == pytest.approx(loss.item(), rel=1e-6)  # labels play no part


def test_between_the_two_the_loss_mixes_soft_targets_and_labels():
    mixed, soft_only, labels_only = (module(alpha=a, temperature=2.0).eval() for a in (0.25, 1.0, 0.0))
    batch = next(iter(tiny_loader()))
    losses = []
    for theseus in (mixed, soft_only, labels_only):
        theseus.replacement_rate = 1.0
        losses.append(theseus.training_step(batch, 0).item())
    assert losses[0] == pytest.approx(0.25 * losses[1] + 0.75 * losses[2], rel=1e-5)


def test_the_teacher_runs_once_per_training_row(tmp_path, monkeypatch):
    rows = []
    original = PredecessorTeacher.__call__

    def counting(self, **inputs):
        rows.extend(tuple(row) for row in inputs["input_ids"].tolist())
        return original(self, **inputs)

    monkeypatch.setattr(distillation.PredecessorTeacher, "__call__", counting)
    theseus = module(alpha=0.5, temperature=2.0)
    make_trainer(tmp_path, 24, replacement_callbacks(ConstantSchedule(1.0, 20))).fit(theseus, tiny_loader(size=32))
    assert len(rows) == len(set(rows)) == 32  # 3 epochs of 8 batches of 4: each row through the teacher once


def test_the_teacher_pass_is_the_predecessor_without_dropout_and_leaves_every_mode_as_it_was():
    model = TheseusModel(tiny_model(), 2).train()
    next(m for m in model.modules() if isinstance(m, torch.nn.Dropout)).eval()  # one part kept in eval mode
    modes = {name: part.training for name, part in model.named_modules()}
    inputs = {key: value for key, value in next(iter(tiny_loader())).items() if key != "labels"}
    logits = PredecessorTeacher(model)(**inputs).logits
    assert {name: part.training for name, part in model.named_modules()} == modes
    model.eval()
    with torch.no_grad():
        assert torch.equal(logits, model([False, False], **inputs).logits)
    assert not logits.requires_grad


@pytest.mark.parametrize(
    ("settings", "field"), [({"alpha": 1.5}, "alpha"), ({"alpha": -0.1}, "alpha"), ({"temperature": 0}, "temperature")]
)
def test_weights_outside_0_1_and_temperatures_at_or_below_0_are_refused(settings, field):
    with pytest.raises(SettingsError) as refused:
        module(**{"alpha": 0.5, "temperature": 2.0, **settings})
    assert field in str(refused.value)
