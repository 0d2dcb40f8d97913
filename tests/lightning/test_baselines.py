"""The paper's baselines: each loss is what the method says, and each runs through the pipeline."""

import copy

import pytest
import torch
import torch.nn.functional as F
from app_runs import compose_config, tiny_run_overrides
from conftest import FAMILIES, tiny_inputs, tiny_model
from transformers import AutoModelForSequenceClassification

from theseus_pl.app.kinds.task_model.record import LayerCounts
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.settings import SettingsError
from theseus_pl.lightning.baselines import DistillationModule, add_layerdrop, patient_loss, remove_layerdrop
from theseus_pl.lightning.distillation import distillation_loss

pytestmark = pytest.mark.quick

LABELS = torch.tensor([0, 2, 1])


def test_distillation_loss_is_temperature_scaled_kl_and_mse_for_regression():
    student, teacher = torch.tensor([[1.0, 0.0, -1.0]]), torch.tensor([[0.0, 2.0, 0.5]])
    t = 4.0
    p = F.softmax(teacher / t, -1)
    expected = (p * (p.log() - F.log_softmax(student / t, -1))).sum() * t**2
    assert distillation_loss(student, teacher, t) == pytest.approx(expected.item(), rel=1e-5)
    assert distillation_loss(teacher, teacher, t).item() == pytest.approx(0.0, abs=1e-6)
    assert distillation_loss(torch.tensor([[1.0]]), torch.tensor([[3.0]]), t).item() == pytest.approx(4.0)


def test_patient_loss_compares_directions_of_cls_states():
    teacher = [torch.randn(4, 8), torch.randn(4, 8)]
    assert patient_loss([3 * h for h in teacher], teacher).item() == pytest.approx(0.0, abs=1e-6)
    opposite = patient_loss([-h for h in teacher], teacher).item()
    assert opposite == pytest.approx(2 * 4.0, rel=1e-5)  # |u - (-u)|^2 = 4 for unit vectors, two layers


def distiller(alpha=0.5, beta=0.0, family="bert"):
    teacher = tiny_model(family).eval()
    student = TheseusModel(copy.deepcopy(teacher), 2, "bottom").to_compact_model().eval()
    return DistillationModule(student, teacher, alpha=alpha, temperature=2.0, beta=beta).eval()


def test_kd_with_alpha_zero_is_plain_fine_tuning():
    module = distiller(alpha=0.0)
    batch = tiny_inputs() | {"labels": LABELS}
    with torch.no_grad():
        assert module.training_step(batch, 0).item() == pytest.approx(module.model(**batch).loss.item(), rel=1e-6)


def test_kd_mixes_soft_targets_and_task_loss():
    module = distiller(alpha=0.3)
    batch = tiny_inputs() | {"labels": LABELS}
    with torch.no_grad():
        student, teacher = module.model(**batch), module.teacher(**tiny_inputs())
        expected = 0.3 * distillation_loss(student.logits, teacher.logits, 2.0) + 0.7 * student.loss
        assert module.training_step(batch, 0).item() == pytest.approx(expected.item(), rel=1e-5)


def test_pkd_adds_the_patient_loss_of_skip_matched_layers():
    module = distiller(alpha=0.5, beta=10.0)
    assert module.teacher_layers == [2]  # 4 -> 2 layers: student layer 1 meets the end of teacher module 1
    batch = tiny_inputs() | {"labels": LABELS}
    with torch.no_grad():
        kd = distiller(alpha=0.5).training_step(batch, 0)
        student = module.model(**batch, output_hidden_states=True)
        teacher = module.teacher(**tiny_inputs(), output_hidden_states=True)
        patient = patient_loss([student.hidden_states[1][:, 0]], [teacher.hidden_states[2][:, 0]])
        assert module.training_step(batch, 0).item() == pytest.approx((kd + 10.0 * patient).item(), rel=1e-5)


def teacher_rows_seen(module):
    """A list that grows by the rows of every batch the teacher runs on."""
    rows = []
    module.teacher.register_forward_hook(lambda _, args, kwargs, out: rows.append(len(kwargs["input_ids"])),
                                         with_kwargs=True)  # fmt: skip
    return rows


def test_kd_runs_the_teacher_once_per_row_whatever_the_batch():
    module = distiller(alpha=0.5)
    rows = teacher_rows_seen(module)
    batch = tiny_inputs() | {"labels": LABELS}
    with torch.no_grad():
        first = module.training_step(batch, 0)
        assert module.training_step(batch, 1).item() == pytest.approx(first.item(), rel=1e-6)  # next epoch
        assert rows == [3]
        # The padded row again (now unpadded and first in a batch of its own length) and a new row beside it:
        # only the new row goes through the teacher, and the known one keeps its logits.
        known = {k: v[-1:, :5] for k, v in tiny_inputs().items()}
        new = {k: v[:1, :5] for k, v in tiny_inputs(seed=7).items()}
        mixed = {k: torch.cat([known[k], new[k]]) for k in known}
        logits = module.teacher_logits(mixed)
        assert rows == [3, 1]
        torch.testing.assert_close(logits, module.teacher(**mixed).logits, atol=1e-5, rtol=0)


def test_pkd_runs_the_teacher_on_every_batch():
    module = distiller(alpha=0.5, beta=1.0)
    rows = teacher_rows_seen(module)
    batch = tiny_inputs() | {"labels": LABELS}
    with torch.no_grad():
        module.training_step(batch, 0)
        module.training_step(batch, 1)
    assert module.teacher_logits is None and rows == [3, 3]


@pytest.mark.parametrize("beta", [0.0, 1.0])  # KD (logits remembered per row) and PKD (the teacher every batch)
def test_the_teacher_runs_frozen_in_eval_mode_and_no_module_is_left_in_eval_mode(beta):
    module = distiller(beta=beta)
    module.on_fit_start()
    calls = []
    module.teacher.register_forward_pre_hook(
        lambda teacher, _: calls.append((teacher.training, torch.is_grad_enabled()))
    )
    module.training_step(tiny_inputs() | {"labels": LABELS}, 0)
    assert calls == [(False, False)]  # no dropout (fixed soft targets), no gradients
    # Lightning warns at the start of every fit about each module it finds in eval mode
    assert all(submodule.training for submodule in module.modules())
    assert not any(p.requires_grad for p in module.teacher.parameters())


@pytest.mark.parametrize("family", FAMILIES)
def test_layerdrop_skips_layers_only_in_training_and_unwraps(family):
    model = tiny_model(family).eval()
    reference = copy.deepcopy(model)
    add_layerdrop(model, 0.9)
    inputs = tiny_inputs()
    with torch.no_grad():
        assert torch.allclose(model(**inputs).logits, reference(**inputs).logits, atol=1e-6)
        model.train()
        torch.manual_seed(0)
        for _ in range(5):  # layers return tensors or tuples: skipping must keep each family's format
            model(**inputs)
        model.eval()
        remove_layerdrop(model)
        assert torch.allclose(model(**inputs).logits, reference(**inputs).logits, atol=1e-6)


def test_the_baselines_settings_are_checked_by_their_modules_naming_each_argument():
    with pytest.raises(SettingsError) as raised:
        distiller(alpha=1.5, beta=-1.0)
    assert raised.value.problems == {
        "alpha": "alpha=1.5 must be a number in [0, 1].",
        "beta": "beta=-1.0 must be a number, at least 0 (0: vanilla KD).",
    }
    with pytest.raises(SettingsError, match=r"drop_rate=1.0 must be a number in \[0, 1\)"):
        add_layerdrop(tiny_model(), 1.0)


@pytest.mark.parametrize("method", ["fine_tuning", "kd", "pkd", "layerdrop"])
def test_every_baseline_runs_and_exports_a_plain_checkpoint(method, tiny_base, glue_dir, tmp_path):
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), f"method={method}"))
    assert results.method == method
    assert results.layers == LayerCounts(predecessor=4, successor=2)
    assert results.schedule is None
    exported = AutoModelForSequenceClassification.from_pretrained(results.successor_dir)
    assert exported.config.num_hidden_layers == 2
    assert f"`{method}` method" in (tmp_path / "run" / "successor" / "README.md").read_text()
