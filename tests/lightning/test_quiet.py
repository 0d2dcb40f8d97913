"""theseus_pl silences exactly the third-party messages users can do nothing about, and nothing else."""

import logging
import warnings

import pytest

from theseus_pl.lightning.quiet import VERBOSE_VARIABLE, expect_own_files, install_filters, training_alone

pytestmark = pytest.mark.quick

PYTREE = "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)` instead."


def test_the_pytree_deprecation_is_silenced_only_where_lightning_raises_it():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        install_filters()
        warnings.warn_explicit(PYTREE, FutureWarning, "_pytree.py", 21, module="lightning.pytorch.utilities._pytree")
        warnings.warn_explicit(PYTREE, FutureWarning, "mine.py", 1, module="my_code")
        warnings.warn_explicit("another", UserWarning, "_pytree.py", 22, module="lightning.pytorch.utilities._pytree")
    assert [str(w.message) for w in caught] == [PYTREE, "another"]


@pytest.mark.parametrize(
    ("notice", "module"),
    [
        ("You're resuming from a checkpoint that ended before the epoch ended and your dataloader is not resumable.",
         "lightning.pytorch.loops.training_epoch_loop"),  # the data module restores the order mid-epoch itself
        ("Precision bf16-mixed is not supported by the model summary.  Estimated model size in MB will not be accurate",
         "lightning.pytorch.utilities.model_summary.model_summary"),  # every bf16 fit
    ],
)  # fmt: skip
def test_lightnings_notice_is_silenced_only_from_the_module_that_gives_it(notice, module):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        install_filters()
        warnings.warn_explicit(notice, UserWarning, "lightning.py", 224, module=module)
        warnings.warn_explicit(notice, UserWarning, "mine.py", 1, module="my_code")
    assert [w.filename for w in caught] == ["mine.py"]


def test_the_litlogger_tip_is_dropped_and_other_lightning_info_kept(caplog):
    install_filters()
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    with caplog.at_level(logging.INFO, logger="lightning.pytorch.utilities.rank_zero"):
        rank_zero.info("💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger]")
        rank_zero.info("GPU available: False, used: False")
    assert [record.getMessage() for record in caplog.records] == ["GPU available: False, used: False"]


def test_only_the_named_folders_notices_of_files_already_there_are_silenced():
    """A resumed run's own checkpoint and log folders: their files are read back. Any other folder's notice stays."""
    checkpoints = (
        "Checkpoint directory {}/checkpoints exists and is not empty.",
        "lightning.pytorch.callbacks.model_checkpoint",
    )
    csv_log = ("Experiment logs directory {}/csv/ exists and is not empty. Previous log files in this directory will "
               "be deleted when the new ones are saved!", "lightning.fabric.loggers.csv_logs")  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expect_own_files("/runs/rte (1)")
        for notice, module in (checkpoints, csv_log):
            for folder in ("/runs/rte (1)", "/runs/rte (1)-b", "/runs/rte"):
                warnings.warn_explicit(notice.format(folder), UserWarning, "lightning.py", 1, module=module)
        warnings.warn_explicit(checkpoints[0].format("/runs/rte (1)"), UserWarning, "mine.py", 1, module="my_code")
    others = [
        notice.format(folder) for notice, _ in (checkpoints, csv_log) for folder in ("/runs/rte (1)-b", "/runs/rte")
    ]
    assert [str(w.message) for w in caught] == [*others, checkpoints[0].format("/runs/rte (1)")]


def test_a_fit_meant_to_train_alone_drops_only_the_no_validation_notice_and_verbose_keeps_it(monkeypatch):
    """``--check``'s timed steps fit without validating on purpose; other fits, and ``--verbose``, keep the notice."""
    notice = "You defined a `validation_step` but have no `val_dataloader`. Skipping val loop."
    validator = "lightning.pytorch.trainer.configuration_validator"

    def shown(verbose: str) -> list[str]:
        monkeypatch.setenv(VERBOSE_VARIABLE, verbose)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with training_alone():
                warnings.warn_explicit(notice, UserWarning, "validator.py", 70, module=validator)
                warnings.warn_explicit("another", UserWarning, "validator.py", 71, module=validator)
            warnings.warn_explicit(notice, UserWarning, "validator.py", 70, module=validator)
        return [str(w.message) for w in caught]

    assert shown("") == ["another", notice]
    assert shown("1") == [notice, "another", notice]
