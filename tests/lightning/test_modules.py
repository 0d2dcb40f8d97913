import copy
import gc
import itertools
import logging

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from conftest import tiny_inputs, tiny_loader, tiny_model
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint
from raise_at_step import RaiseAtStep

from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ConstantSchedule, CurriculumSchedule
from theseus_pl.lightning.callbacks import (
    ClosingProgressBar,
    DivergedError,
    PhaseSwitch,
    ReplacementScheduler,
    ResumeCheckpoint,
    StepSeed,
    StopAtNonFiniteLoss,
    StopBelowScore,
    StoppedBelowScore,
    replacement_callbacks,
)
from theseus_pl.lightning.modules import FineTuningModule, TheseusModule

pytestmark = pytest.mark.quick


def make_trainer(tmp_path, max_steps, callbacks=(), **overrides):
    settings = dict(
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
        callbacks=list(callbacks),
    )
    settings.update(overrides)
    return pl.Trainer(**settings)


def theseus_module(family="bert", modules=2, lr=1e-3, seed=7):
    return TheseusModule(TheseusModel(tiny_model(family), modules), lr=lr, seed=seed)


class Recorder(Callback):
    """Keeps (step, p, gate, phase) of every training batch."""

    def __init__(self):
        self.rows = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        phase = next(cb for cb in trainer.callbacks if isinstance(cb, PhaseSwitch)).phase(trainer.global_step - 1)
        self.rows.append((trainer.global_step - 1, pl_module.replacement_rate, pl_module.last_gate.tolist(), phase))


def test_gate_draws_are_bernoulli_p_and_independent_across_modules():
    module = TheseusModule(TheseusModel(tiny_model(), 4), seed=3)
    draws = torch.stack([module.draw_gate(0.3) for _ in range(20_000)]).float()
    assert torch.allclose(draws.mean(0), torch.full((4,), 0.3), atol=0.015)
    for i, j in itertools.combinations(range(4), 2):
        assert (draws[:, i] * draws[:, j]).mean().item() == pytest.approx(0.09, abs=0.01)
    assert draws[:, 0].ne(draws[:, 1]).float().mean().item() == pytest.approx(2 * 0.3 * 0.7, abs=0.015)
    assert module.draw_gate(1.0).all()
    assert not module.draw_gate(0.0).any()


def test_training_changes_only_successor_layers(family, tmp_path):
    module = theseus_module(family)
    before = copy.deepcopy(module.model.state_dict())
    schedule = CurriculumSchedule(b=0.5, k=0.1)
    make_trainer(tmp_path, 6, replacement_callbacks(schedule)).fit(module, tiny_loader())
    after = module.model.state_dict()
    changed = {key for key in before if not torch.equal(before[key], after[key])}
    successor_keys = {key for key in before if ".successor." in key}
    assert changed, "training must update the successor"
    assert changed <= successor_keys
    assert {key.split(".successor.")[0] for key in changed} == {key.split(".successor.")[0] for key in successor_keys}
    for name, parameter in module.model.named_parameters():
        if ".successor." not in name:
            assert parameter.grad is None, f"{name} is frozen but got a gradient"


def test_modules_before_the_first_replaced_one_run_without_autograd():
    theseus = TheseusModel(tiny_model(), 3).train()  # 4 layers -> modules of 2, 1, 1
    tracks_grad = []
    hooks = [
        block.register_forward_hook(lambda _m, _i, out: tracks_grad.append(out.requires_grad))
        for block in theseus.blocks
    ]
    theseus([False, True, False], **tiny_inputs(), labels=torch.tensor([0, 1, 2])).loss.backward()
    for hook in hooks:
        hook.remove()
    assert tracks_grad == [False, True, True]


def test_a_batch_that_replaces_nothing_skips_the_model_but_advances_the_schedule(tmp_path):
    module = theseus_module()
    before = copy.deepcopy(module.model.state_dict())
    forward_calls = []
    module.model.model.register_forward_pre_hook(lambda *_: forward_calls.append(1))
    recorder = Recorder()
    schedule = ConstantSchedule(p=0.0, switch_step=100)
    trainer = make_trainer(tmp_path, 5, [*replacement_callbacks(schedule), recorder])
    trainer.fit(module, tiny_loader())
    assert trainer.global_step == 5
    assert [row[0] for row in recorder.rows] == [0, 1, 2, 3, 4]
    assert not forward_calls
    after = module.model.state_dict()
    assert all(torch.equal(before[key], after[key]) for key in before)
    assert trainer.lr_scheduler_configs[0].scheduler.get_last_lr()[0] < 1e-3


class AlwaysBackward(TheseusModule):
    """Behaves as under DDP, where Lightning cannot skip a batch."""

    backward_on_every_batch = True


def test_under_ddp_a_batch_that_replaces_nothing_still_leaves_the_weights_alone(tmp_path):
    module = AlwaysBackward(TheseusModel(tiny_model(), 2), lr=1e-3, seed=7)
    before = copy.deepcopy(module.model.state_dict())
    trainer = make_trainer(tmp_path, 3, replacement_callbacks(ConstantSchedule(p=0.0, switch_step=100)))
    trainer.fit(module, tiny_loader())
    assert trainer.global_step == 3
    after = module.model.state_dict()
    assert all(torch.equal(before[key], after[key]) for key in before)
    assert all(not trainer.optimizers[0].state[p] for p in module.model.successor_parameters())


class GivenGates:
    """Draws the gates it is given, in turn: what each micro-batch of a step replaces."""

    gates = ([True, False], [False, False])

    def draw_gate(self, p):
        self.drawn = getattr(self, "drawn", -1) + 1
        return torch.tensor(self.gates[self.drawn % len(self.gates)])


class GivenGatesModule(GivenGates, TheseusModule):
    pass


class GivenGatesUnderDDP(GivenGates, AlwaysBackward):
    pass


def test_with_accumulation_a_batch_that_replaces_nothing_keeps_what_the_steps_earlier_batches_learned(tmp_path):
    """Under DDP its zero loss's backward once dropped every successor gradient, the step's earlier micro-batch's
    too, so that step updated nothing; it must train as the run that skips the batch."""
    trained = []
    for module_class in (GivenGatesModule, GivenGatesUnderDDP):
        module = module_class(TheseusModel(tiny_model(), 2), lr=1e-2, seed=7)
        before = copy.deepcopy(module.model.state_dict())
        schedule = ConstantSchedule(p=0.5, switch_step=100)
        make_trainer(tmp_path, 2, replacement_callbacks(schedule), accumulate_grad_batches=2).fit(module, tiny_loader())
        after = module.model.state_dict()
        assert {key.split(".successor.")[0] for key in before if not torch.equal(before[key], after[key])} == {
            "model.bert.encoder.layer.0"  # the first module, which the first micro-batch of each step replaced
        }
        trained.append(after)
    assert all(torch.equal(trained[0][key], trained[1][key]) for key in trained[0])


def test_p_gate_and_phase_follow_the_schedule_and_are_logged(tmp_path):
    recorder = Recorder()
    schedule = ConstantSchedule(p=0.5, switch_step=4)
    trainer = make_trainer(tmp_path, 6, [*replacement_callbacks(schedule), recorder], log_every_n_steps=1)
    trainer.fit(theseus_module(), tiny_loader())
    assert [row[1] for row in recorder.rows] == [0.5, 0.5, 0.5, 0.5, 1.0, 1.0]
    assert [row[3] for row in recorder.rows] == [1, 1, 1, 1, 2, 2]
    assert all(gate == [True, True] for _, _, gate, _ in recorder.rows[4:])
    metrics = trainer.callback_metrics
    assert metrics["train/p"] == 1.0
    assert metrics["train/replaced_modules"] == 2.0
    assert metrics["train/phase"] == 2.0
    assert "train/loss" in metrics


def test_resume_restores_p_phase_and_gate_generator(tmp_path):
    schedule = CurriculumSchedule(b=0.2, k=0.1)  # p reaches 1 at step 8

    straight = Recorder()
    make_trainer(tmp_path / "a", 10, [*replacement_callbacks(schedule), straight]).fit(theseus_module(), tiny_loader())

    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=5, save_top_k=-1)
    make_trainer(tmp_path / "b", 5, [*replacement_callbacks(schedule), checkpoint], enable_checkpointing=True).fit(
        theseus_module(), tiny_loader()
    )
    resumed = Recorder()
    make_trainer(tmp_path / "c", 10, [*replacement_callbacks(schedule), resumed]).fit(
        theseus_module(), tiny_loader(), ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=5.ckpt")
    )
    assert resumed.rows == straight.rows[5:]
    assert len({tuple(row[2]) for row in straight.rows[:8]}) > 1, "gates must vary between batches"


def test_the_resume_checkpoint_holds_the_optimizer_and_logs_no_weights_only_notice(tmp_path, caplog):
    connector = logging.getLogger("lightning.pytorch.trainer.connectors.checkpoint_connector")
    connector.addHandler(caplog.handler)  # Lightning's loggers may not propagate to the root, where caplog listens
    try:
        with caplog.at_level(logging.INFO, logger=connector.name):
            resume = ResumeCheckpoint(tmp_path / "ckpt", every_n_steps=2)
            callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=2)), resume]
            trainer = make_trainer(tmp_path, 4, callbacks, enable_checkpointing=True)
            trainer.fit(theseus_module(), tiny_loader())
    finally:
        connector.removeHandler(caplog.handler)
    saved = torch.load(tmp_path / "ckpt" / "last.ckpt", map_location="cpu", weights_only=False)
    assert saved["global_step"] == 4 and saved["optimizer_states"]
    assert "weights_only" not in caplog.text


class SavesRecorded(ResumeCheckpoint):
    def _save(self, trainer):
        self.saved = [*getattr(self, "saved", []), (trainer.global_step, trainer.fit_loop.epoch_loop.batch_idx)]
        super()._save(trainer)


def test_under_gradient_accumulation_the_resume_checkpoint_is_written_only_where_a_step_ended(tmp_path):
    """It was written after the first batch too (step 0, a multiple of every step), and after the first batch of a
    resumed run's next step: without that batch's gradients, which a checkpoint does not hold."""
    schedule = ConstantSchedule(p=0.5, switch_step=2)
    first = SavesRecorded(tmp_path / "ckpt", every_n_steps=1)
    make_trainer(tmp_path, 3, [*replacement_callbacks(schedule), first], accumulate_grad_batches=2,
                 enable_checkpointing=True).fit(theseus_module(), tiny_loader())  # fmt: skip
    assert first.saved == [(1, 1), (2, 3), (3, 5)]  # (step, batch): each step's second batch
    resumed = SavesRecorded(tmp_path / "ckpt", every_n_steps=1)
    make_trainer(tmp_path, 4, [*replacement_callbacks(schedule), resumed], accumulate_grad_batches=2,
                 enable_checkpointing=True).fit(theseus_module(), tiny_loader(), ckpt_path=str(first.path))  # fmt: skip
    assert resumed.saved == [(4, 7)]


def test_the_replacement_scheduler_logs_its_schedule_in_words(caplog):
    with caplog.at_level(logging.INFO, logger="theseus_pl.lightning.callbacks"):
        ReplacementScheduler(ConstantSchedule(p=0.5, switch_step=4)).on_fit_start(None, None)
    assert "Replacement schedule: constant: p = 0.5 until step 4, then 1." in caplog.messages


def test_a_training_under_its_score_from_its_share_of_steps_on_stops_at_that_validation(tmp_path):
    """A search's hopeless trial: the first validation from ``after`` of the steps on that scores under ``below``
    stops the training, none before; ``below=None`` never does. (The tiny loss, read as a score, is always under
    10**9 and never under 0.)"""

    def steps(**settings) -> int:
        trainer = make_trainer(tmp_path, 8, [StopBelowScore(monitor="val/loss", **settings)], val_check_interval=2,
                               limit_val_batches=1)  # fmt: skip
        trainer.fit(FineTuningModule(tiny_model()), tiny_loader(size=128), tiny_loader(size=8))
        return trainer.global_step

    whole = (r"^Stopped at step 4 of 8: val/loss is \d+\.\d\d, under the 1e\+09 asked of it from 50% of its steps on "
             r"\(callbacks\.stop_below\)\. Nothing was recorded\.$")  # fmt: skip
    with pytest.raises(StoppedBelowScore, match=whole):
        steps(below=1e9, after=0.5)
    with pytest.raises(StoppedBelowScore, match=r"^Stopped at step 2 of 8"):
        steps(below=1e9, after=0.0)
    assert steps(below=0.0, after=0.0) == steps(below=None) == 8


def test_early_stopping_cannot_end_the_run_before_the_switch(tmp_path):
    def run(callbacks):
        never_improves = EarlyStopping(monitor="val/loss", patience=1, min_delta=1e6)
        trainer = make_trainer(tmp_path, 30, [*callbacks, never_improves], val_check_interval=2, limit_val_batches=1)
        trainer.fit(theseus_module(), tiny_loader(size=128), tiny_loader(size=8))
        return trainer.global_step

    schedule = ConstantSchedule(p=0.5, switch_step=10)
    assert run([ReplacementScheduler(schedule)]) == 4
    assert run(replacement_callbacks(schedule)) == 12


@pytest.mark.parametrize("switch_step", [2, 10], ids=["stopped after the switch", "asked to stop before it"])
def test_a_resumed_run_ends_where_the_run_would_have_ended_whatever_early_stopping_asked(tmp_path, switch_step):
    """A run killed after early stopping ended its training (while it scored and exported) resumes to its end:
    Lightning restores the patience but not the stop request, and trained on. A request made before the switch is
    held back on resume as it was in the run, until the switch clears it."""

    def fit(name, *more, ckpt_path=None):
        never_improves = EarlyStopping(monitor="val/loss", patience=1, min_delta=1e6)
        callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=switch_step)), never_improves,
                     ResumeCheckpoint(tmp_path / name), *more]  # fmt: skip
        trainer = make_trainer(tmp_path / name, 30, callbacks, val_check_interval=2, limit_val_batches=1,
                               enable_checkpointing=True)  # fmt: skip
        trainer.fit(theseus_module(), tiny_loader(size=128), tiny_loader(size=8), ckpt_path=ckpt_path)
        return trainer.global_step

    ended = fit("straight")
    assert ended == (4 if switch_step == 2 else 12)
    assert fit("after its end", ckpt_path=str(tmp_path / "straight" / "last.ckpt")) == ended
    if switch_step == 10:
        with pytest.raises(RuntimeError, match="planned failure at step 6"):  # after step 4's stop request
            fit("killed", RaiseAtStep(6))
        assert fit("resumed", ckpt_path=str(tmp_path / "killed" / "last.ckpt")) == ended


def test_a_failed_fit_closes_its_progress_bars_so_nothing_prints_later(tmp_path, capsys):
    callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=2)), ClosingProgressBar(), RaiseAtStep(3)]
    trainer = make_trainer(tmp_path, 6, callbacks, enable_progress_bar=True, val_check_interval=2, limit_val_batches=1)
    with pytest.raises(RuntimeError, match="planned failure at step 3"):
        trainer.fit(theseus_module(), tiny_loader(), tiny_loader(size=8))
    assert "Epoch 0" in capsys.readouterr().out
    del trainer, callbacks
    gc.collect()  # an open bar prints its last line when it is collected (at the latest, as the process ends)
    assert capsys.readouterr().out == ""


def test_a_fits_bar_names_its_epoch_and_total_from_its_first_line(tmp_path, capsys):
    """Lightning's opened as "Training: 0/?" before the first epoch began, a stray line in every run's output."""
    callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=2)), ClosingProgressBar(refresh_rate=1)]
    make_trainer(tmp_path, 3, callbacks, enable_progress_bar=True).fit(theseus_module(), tiny_loader())
    lines = [line.strip() for line in capsys.readouterr().out.replace("\r", "\n").splitlines() if line.strip()]
    assert lines and all(line.startswith("Epoch 0: ") and "/3 " in line for line in lines), lines


def test_a_fit_resumed_mid_epoch_shows_its_epoch_total_and_place(tmp_path, capsys):
    """Lightning skips its epoch-start hooks when it resumes mid-epoch, so its bar said "Training: 5/?": no epoch, no
    total, no time left (at base size an epoch of SST-2 is hours), and a rate counted from the epoch's start."""
    callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=2)), ResumeCheckpoint(tmp_path, 3)]
    make_trainer(tmp_path, 3, callbacks, enable_checkpointing=True).fit(theseus_module(), tiny_loader())
    capsys.readouterr()
    bar = ClosingProgressBar(refresh_rate=1)
    callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=2)), bar]
    trainer = make_trainer(tmp_path, 6, callbacks, enable_progress_bar=True)
    trainer.fit(theseus_module(), tiny_loader(), ckpt_path=str(tmp_path / "last.ckpt"))  # 8 batches an epoch, 6 run
    last_line = capsys.readouterr().out.replace("\r", "\n").strip().splitlines()[-1]
    assert last_line.startswith("Epoch 0: 100%") and " 6/6 " in last_line
    assert bar.train_progress_bar.initial == 3  # its rate and time left count the steps of this fit only


def test_training_without_a_replacement_scheduler_says_what_to_add(tmp_path):
    with pytest.raises(
        RuntimeError, match=r"add the callbacks from theseus_pl\.lightning\.callbacks\.replacement_callbacks"
    ):
        make_trainer(tmp_path, 1).fit(theseus_module(), tiny_loader())


def test_optimizer_holds_only_successor_parameters_without_decay_on_1d(tmp_path):
    module = theseus_module()
    trainer = make_trainer(tmp_path, 1, replacement_callbacks(ConstantSchedule(1.0, 0)))
    trainer.fit(module, tiny_loader())
    groups = trainer.optimizers[0].param_groups
    optimised = {id(p) for group in groups for p in group["params"]}
    assert optimised == {id(p) for p in module.model.successor_parameters()}
    assert all((p.dim() < 2) == (group["weight_decay"] == 0.0) for group in groups for p in group["params"])


def test_validation_and_prediction_use_every_successor(tmp_path):
    module = theseus_module()
    module.model.set_gate([False, False])
    trainer = make_trainer(tmp_path, 1)
    predictions = trainer.predict(module, tiny_loader(size=4))
    with torch.no_grad():
        expected = module.model.eval()(**{k: v for k, v in next(iter(tiny_loader(size=4))).items() if k != "labels"})
    assert torch.allclose(predictions[0], expected.logits)
    module.model.set_gate([False, False])
    trainer.validate(module, tiny_loader(size=4), verbose=False)
    assert all(block.use_successor for block in module.model.blocks)


class ModeRecorder(Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.modes = {name: module.training for name, module in pl_module.named_modules()}


@pytest.mark.parametrize("make", [lambda m: TheseusModule(TheseusModel(m, 2)), FineTuningModule])
def test_training_runs_with_dropout_on_even_from_an_eval_mode_model(make, tmp_path):
    module = make(tiny_model().eval())  # as from_pretrained returns it
    recorder = ModeRecorder()
    make_trainer(tmp_path, 1, [*replacement_callbacks(ConstantSchedule(1.0, 0)), recorder]).fit(module, tiny_loader())
    assert all(recorder.modes.values())


def test_fine_tuning_trains_every_parameter(tmp_path):
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    make_trainer(tmp_path, 3).fit(FineTuningModule(model, lr=1e-3), tiny_loader())
    unchanged = [key for key, value in model.state_dict().items() if torch.equal(before[key], value)]
    assert all("position_ids" in key or "token_type_ids" in key for key in unchanged), unchanged


def test_per_step_numbers_are_logged_as_tensors_and_only_on_steps_the_loggers_write(tmp_path):
    module = theseus_module()
    logged = []
    log = module.log

    def spy(name, value, *args, **kwargs):
        logged.append((name, value))
        return log(name, value, *args, **kwargs)

    module.log = spy
    schedule = ConstantSchedule(p=1.0, switch_step=2)
    trainer = make_trainer(tmp_path, 6, replacement_callbacks(schedule), log_every_n_steps=3)
    trainer.fit(module, tiny_loader())
    names = [name for name, _ in logged]
    # Each LightningModule.log call costs about a millisecond: numbers the loggers would drop are not logged.
    assert names.count("train/loss") == 6
    assert names.count("train/p") == names.count("train/replaced_modules") == names.count("train/phase") == 2
    # A Python number would become a tensor on the model's device: a blocking host-to-device copy per step.
    assert all(isinstance(value, torch.Tensor) for _, value in logged), logged
    assert trainer.callback_metrics["train/phase"] == 2.0


def test_a_training_step_called_by_hand_needs_no_trainer(recwarn):
    module = theseus_module().eval()  # no dropout: the two forward passes must agree
    module.replacement_rate = 1.0
    batch = next(iter(tiny_loader()))
    assert module.training_step(batch, 0).item() == pytest.approx(module.model(None, **batch).loss.item())
    assert not recwarn.list  # nor warns that it has none to log to


class SharedWatcher(Callback):
    """Keeps, per training step, whether the shared parts required grad and whether their weights had moved."""

    def __init__(self, module):
        self.start = [p.detach().clone() for p in module.model.shared_parameters()]
        self.rows = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        shared = pl_module.model.shared_parameters()
        moved = any(not torch.equal(p, q) for p, q in zip(shared, self.start, strict=True))
        self.rows.append((trainer.global_step - 1, all(p.requires_grad for p in shared), moved))


def test_finetune_shared_trains_embeddings_and_head_from_the_switch_only(tmp_path):
    schedule = ConstantSchedule(1.0, 3)  # every module replaced; the switch to successor fine-tuning at step 3
    module = TheseusModule(TheseusModel(tiny_model(), 2), lr=1e-2, shared_trainable_from=3)
    watcher = SharedWatcher(module)
    make_trainer(tmp_path, 5, [*replacement_callbacks(schedule), watcher]).fit(module, tiny_loader())
    assert watcher.rows == [(0, False, False), (1, False, False), (2, False, False), (3, True, True), (4, True, True)]
    names = {name.split(".")[0] for name, p in module.model.model.named_parameters() if p.requires_grad}
    assert names >= {"bert", "classifier"}  # embeddings and pooler live under bert.*, the head is the classifier


def test_without_finetune_shared_the_embeddings_and_head_never_train(tmp_path):
    module = theseus_module()
    watcher = SharedWatcher(module)
    make_trainer(tmp_path, 5, [*replacement_callbacks(ConstantSchedule(1.0, 3)), watcher]).fit(module, tiny_loader())
    assert watcher.rows == [(step, False, False) for step in range(5)]


def test_finetune_shared_refuses_reference_mode():
    with pytest.raises(ValueError, match="reference_mode"):
        TheseusModule(TheseusModel(tiny_model(), 2), reference_mode=True, shared_trainable_from=3)


class RateRecorder(Callback):
    def __init__(self):
        self.rates = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])


@pytest.mark.parametrize(
    ("restart", "expected"), [(None, [1.0, 0.8, 0.6, 0.4, 0.2]), (2, [1.0, 0.5, 1.0, 2 / 3, 1 / 3])]
)
def test_the_learning_rate_decays_once_or_restarts_at_the_switch(tmp_path, restart, expected):
    module = TheseusModule(TheseusModel(tiny_model(), 2), lr=1.0, lr_restart_step=restart)
    recorder = RateRecorder()
    make_trainer(tmp_path, 5, [*replacement_callbacks(ConstantSchedule(1.0, 2)), recorder]).fit(module, tiny_loader())
    assert recorder.rates == pytest.approx(expected)


@pytest.mark.parametrize(
    ("lr", "steps", "message"),
    [
        (1e8, 20, r"The training diverged at step \d+: its loss is nan\. Nothing was recorded\. Lower the rate\.$"),
        # the one step's loss was finite; its update was not: the weights say so as the training ends
        (float("inf"), 1, r"The training diverged: \d+ trained weights are not finite \(model\..*\) after step 1\."),
    ],
    ids=["by-its-loss", "by-its-weights"],
)
def test_a_training_that_diverges_stops_there_and_says_what_to_change(tmp_path, lr, steps, message):
    module = FineTuningModule(tiny_model(), lr=lr)
    with pytest.raises(DivergedError, match=message):
        make_trainer(tmp_path, steps, [StopAtNonFiniteLoss("Lower the rate")]).fit(module, tiny_loader())


class DropoutMasks(FineTuningModule):
    """Keeps a dropout mask drawn from torch's global generator at each batch, as the model's dropout draws."""

    def training_step(self, batch, batch_idx):
        self.masks = [*getattr(self, "masks", []), torch.nn.functional.dropout(torch.ones(64), 0.5, True).bool()]
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("accumulate", [1, 2])
def test_step_seed_gives_each_batch_of_a_step_its_own_dropout_and_keeps_the_seeds_without_accumulation(
    tmp_path, accumulate
):
    module = DropoutMasks(tiny_model(), lr=1e-3)
    make_trainer(tmp_path, 3, [StepSeed(5)], accumulate_grad_batches=accumulate).fit(module, tiny_loader())
    assert len(module.masks) == 3 * accumulate
    assert len({tuple(mask.tolist()) for mask in module.masks}) == len(module.masks)  # the step's batches too
    if accumulate == 1:  # the seeds every run took before accumulation had its own: (seed, step)
        for step, mask in enumerate(module.masks):
            torch.manual_seed(int(np.random.SeedSequence([5, step]).generate_state(1)[0]))
            assert torch.equal(mask, torch.nn.functional.dropout(torch.ones(64), 0.5, True).bool())
