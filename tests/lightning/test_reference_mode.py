"""Skipping work is safe: the lean Theseus step trains exactly as the authors' design does (reference mode)."""

import copy

import pytest
import torch
from conftest import tiny_loader, tiny_model
from lightning.pytorch.callbacks import Callback
from test_modules import make_trainer

from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ConstantSchedule
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.modules import TheseusModule

pytestmark = pytest.mark.quick


class GradientRecorder(Callback):
    """Reseeds dropout before every batch (a skipped batch draws no dropout masks) and keeps every gradient."""

    def __init__(self):
        self.gates, self.successor_grads, self.frozen_grads = [], [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        torch.manual_seed(1000 + batch_idx)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.gates.append(pl_module.last_gate.tolist())
        named = dict(pl_module.model.named_parameters())
        self.successor_grads.append(
            {n: None if p.grad is None else p.grad.clone() for n, p in named.items() if ".successor." in n}
        )
        self.frozen_grads.append({n for n, p in named.items() if ".successor." not in n and p.grad is not None})


def train(tmp_path, reference_mode, family="bert", steps=8):
    module = TheseusModule(TheseusModel(tiny_model(family), 3), lr=1e-2, seed=5, reference_mode=reference_mode)
    recorder = GradientRecorder()
    schedule = ConstantSchedule(p=0.5, switch_step=100)
    trainer = make_trainer(tmp_path, steps, [*replacement_callbacks(schedule), recorder], gradient_clip_val=1.0)
    trainer.fit(module, tiny_loader(size=64))
    return module, recorder, trainer


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_the_lean_step_gives_the_reference_modes_successor_gradients(family, tmp_path):
    lean, lean_run, _ = train(tmp_path / "lean", reference_mode=False, family=family)
    reference, reference_run, _ = train(tmp_path / "reference", reference_mode=True, family=family)

    assert lean_run.gates == reference_run.gates
    gates = {tuple(gate) for gate in lean_run.gates}
    assert (False, False, False) in gates and len(gates) >= 4, f"the seed must exercise varied gates: {gates}"
    for step, (ours, theirs) in enumerate(zip(lean_run.successor_grads, reference_run.successor_grads, strict=True)):
        assert ours.keys() == theirs.keys()
        for name in ours:
            if ours[name] is None or theirs[name] is None:
                assert ours[name] is None and theirs[name] is None, f"step {step}: {name}"
            else:
                torch.testing.assert_close(ours[name], theirs[name], atol=1e-6, rtol=0, msg=f"step {step}: {name}")
    lean_state, reference_state = lean.model.state_dict(), reference.model.state_dict()
    for key in lean_state:
        torch.testing.assert_close(lean_state[key], reference_state[key], atol=1e-6, rtol=0)


def test_reference_mode_computes_every_gradient_and_still_trains_only_successors(tmp_path):
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    module, recorder, trainer = train(tmp_path, reference_mode=True)

    assert all(p.requires_grad for p in module.model.parameters())
    for gate, frozen_with_grad in zip(recorder.gates, recorder.frozen_grads, strict=True):
        assert any(".word_embeddings." in name for name in frozen_with_grad), f"gate {gate}: nothing skipped"
    optimised = {id(p) for group in trainer.optimizers[0].param_groups for p in group["params"]}
    assert optimised == {id(p) for p in module.model.successor_parameters()}
    after = module.model.model.state_dict()
    frozen = [key for key in after if ".successor." not in key and ".predecessor." not in key]
    assert frozen and all(torch.equal(after[key], before[key]) for key in frozen)


def test_lean_mode_computes_no_gradient_for_frozen_parts(tmp_path):
    _, recorder, _ = train(tmp_path, reference_mode=False)
    assert recorder.frozen_grads and not any(recorder.frozen_grads)
