"""Narrow filters for Lightning's messages that point at nothing a user of theseus_pl can change.

Each filter matches one message from the module that gives it; every other warning, and every warning about a choice
the user made, still shows. They are installed when :mod:`theseus_pl.lightning` is first imported, for the app and for
library users alike (those of a folder's files, :func:`expect_own_files`, by a run that resumes from that folder),
unless ``THESEUS_PL_VERBOSE`` is set (``python -m theseus_pl --verbose`` sets it).
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

VERBOSE_VARIABLE = "THESEUS_PL_VERBOSE"
# Lightning's own use of a torch pytree class that torch deprecated (printed on every fit and validate).
PYTREE_DEPRECATION = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
# Lightning's advertisement for its hosted logger, printed by every Trainer that has other loggers.
LITLOGGER_TIP = "💡 Tip: For seamless cloud logging and experiment tracking"
# Lightning cannot see that the data module restores the training order mid-epoch (training_order.py).
MID_EPOCH_RESUME = "You're resuming from a checkpoint that ended before the epoch ended"
# TheseusModule skips a batch that replaces no module (nothing to train) by returning None, on purpose.
SKIPPED_STEP = r"`training_step` returned `None`"
# Lightning's model summary cannot size a bf16-mixed model's parameters (printed by every bf16 fit).
SUMMARY_PRECISION = r"Precision bf16-mixed is not supported by the model summary"
# Lightning's notices that a checkpoint or CSV log folder already holds files ("... will be deleted" for the log).
FOLDER_NOT_EMPTY = r"(Checkpoint|Experiment logs) directory {folder}(/\S*)? exists and is not empty"
FOLDER_NOTICE_MODULES = r"lightning\.(pytorch\.callbacks\.model_checkpoint|fabric\.loggers\.csv_logs)"
# Lightning's notice that a fit given training batches alone will not validate (said of a fit that means not to).
NO_VALIDATION_LOADER = r"You defined a `validation_step` but have no `val_dataloader`"


def verbose() -> bool:
    """Whether the user asked to see everything (``THESEUS_PL_VERBOSE`` set to anything but empty or 0)."""
    return os.environ.get(VERBOSE_VARIABLE, "") not in ("", "0")


class _DropMessage(logging.Filter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def install_filters() -> None:
    warnings.filterwarnings("ignore", message=PYTREE_DEPRECATION, module=r"lightning\.pytorch\.utilities\._pytree")
    warnings.filterwarnings(
        "ignore", message=MID_EPOCH_RESUME, module=r"lightning\.pytorch\.loops\.training_epoch_loop"
    )
    warnings.filterwarnings("ignore", message=SKIPPED_STEP)
    warnings.filterwarnings(
        "ignore", message=SUMMARY_PRECISION, module=r"lightning\.pytorch\.utilities\.model_summary\.model_summary"
    )
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropMessage) for f in rank_zero.filters):
        rank_zero.addFilter(_DropMessage(LITLOGGER_TIP))


def expect_own_files(folder: str | os.PathLike[str]) -> None:
    """Silence Lightning's notices that a checkpoint or log folder in ``folder`` already holds files, for a folder
    whose files are the run's own, left there to resume from: its ``last.ckpt`` is read back and its log rows before
    the checkpoint carried over, so "exists and is not empty" points at nothing to change and the CSV log's "Previous
    log files ... will be deleted" is untrue. Every other folder keeps the notices."""
    if not verbose():
        message = FOLDER_NOT_EMPTY.format(folder=re.escape(str(folder)))
        warnings.filterwarnings("ignore", message=message, module=FOLDER_NOTICE_MODULES)


@contextmanager
def quiet_trainer_construction() -> Iterator[None]:
    """A Trainer built only to read what Lightning makes of its settings (the run's checks) prints none of the lines
    ("GPU available: ...") that the run's own Trainer prints again."""
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    level = rank_zero.level
    rank_zero.setLevel(logging.WARNING)
    try:
        yield
    finally:
        rank_zero.setLevel(level)


@contextmanager
def training_alone() -> Iterator[None]:
    """A fit that trains without validating on purpose (``--check``'s timed steps, whose validation pass is timed on
    its own) prints no notice that it skips validation: the run it stands for validates."""
    with warnings.catch_warnings():
        if not verbose():
            warnings.filterwarnings(
                "ignore", message=NO_VALIDATION_LOADER, module=r"lightning\.pytorch\.trainer\.configuration_validator"
            )
        yield
