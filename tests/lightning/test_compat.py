"""The Lightning internals in ``lightning/_compat.py``, each checked in a real fit against the version they were read
from: a Lightning upgrade that changes one fails here, naming it."""

import lightning
import pytest
from conftest import tiny_loader
from lightning.pytorch.callbacks import Callback, EarlyStopping
from lightning.pytorch.loggers import WandbLogger
from test_modules import make_trainer, theseus_module

from theseus_pl.core.schedules import ConstantSchedule
from theseus_pl.lightning import _compat
from theseus_pl.lightning.callbacks import replacement_callbacks

pytestmark = pytest.mark.quick


def test_the_internals_were_checked_against_the_installed_lightning():
    assert lightning.__version__.startswith(_compat.CHECKED_WITH + "."), (
        f"lightning/_compat.py was checked against Lightning {_compat.CHECKED_WITH}, this is {lightning.__version__}: "
        "check each of its functions against the new version (this file's tests), then update CHECKED_WITH."
    )


class Record(Callback):
    """Per training batch: whether the loggers write it and whether a validation follows; at the start, min_steps and
    whether the module's trainer is the one running it."""

    def __init__(self):
        self.logged, self.validated_after, self.predicted, self.min_steps, self.attached = [], [], [], None, None

    def on_train_start(self, trainer, pl_module):
        self.min_steps = trainer.fit_loop.min_steps
        self.attached = _compat.attached_trainer(pl_module) is trainer

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if _compat.logs_this_step(pl_module):
            self.logged.append(trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.predicted.append((trainer.global_step, _compat.validation_follows(trainer, batch_idx)))

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.validated_after.append(trainer.global_step)


@pytest.mark.parametrize("val_check_interval", [2, 3])
def test_the_logging_steps_validation_timing_and_min_steps_match_lightnings(tmp_path, val_check_interval):
    record = Record()
    callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=4)), record]
    trainer = make_trainer(tmp_path, 8, callbacks, log_every_n_steps=3, val_check_interval=val_check_interval,
                           check_val_every_n_epoch=None)  # fmt: skip
    trainer.fit(theseus_module(), tiny_loader(), tiny_loader(8))
    assert record.logged == [2, 5]  # Lightning's rule: the (step + 1)-th batch is logged when divisible by 3
    assert [step for step, follows in record.predicted if follows] == record.validated_after
    assert record.validated_after == list(range(val_check_interval, 9, val_check_interval))
    assert record.min_steps == 5  # PhaseSwitch raised it past the switch at step 4
    assert record.attached


def test_a_stop_asked_before_the_phase_switch_validates_at_the_intervals_as_lightning_does(tmp_path):
    """Early stopping asks at the second validation (step 4), min_steps holds the run past the switch at 6: Lightning
    validates at the intervals' steps, not after each step while the stop waits (the resume checkpoint, which skips a
    step a validation follows, then wrote none of those steps' checkpoints)."""
    record = Record()
    never_better = EarlyStopping("val/loss", mode="max", patience=0, min_delta=1e9)
    callbacks = [*replacement_callbacks(ConstantSchedule(p=0.5, switch_step=6)), never_better, record]
    trainer = make_trainer(tmp_path, 12, callbacks, val_check_interval=2, check_val_every_n_epoch=None)
    trainer.fit(theseus_module(), tiny_loader(64), tiny_loader(8))
    # the intervals' (the switch cleared the stop; phase 2's early stopping asked again at 8, and the run ended there)
    assert record.validated_after == [2, 4, 6, 8] and trainer.global_step == 8
    assert [step for step, follows in record.predicted if follows] == record.validated_after  # not 5 too


def test_a_module_no_trainer_runs_logs_nothing():
    assert not _compat.logs_this_step(theseus_module())
    assert _compat.attached_trainer(theseus_module()) is None


def test_lightning_still_passes_wandb_the_anonymous_argument_that_is_taken_out(tmp_path):
    logger = WandbLogger(project="p", save_dir=str(tmp_path), offline=True)
    assert "anonymous" in logger._wandb_init  # if not, Lightning stopped passing it: the function can go
    assert "anonymous" not in _compat.without_wandb_anonymous(logger)._wandb_init
    assert logger._wandb_init["project"] == "p"  # the rest left as it was
