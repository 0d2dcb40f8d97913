"""Narrow filters for third-party messages that point at nothing a user of the app can change.

Each filter matches one message from one module; every other warning, and every warning about a choice the
user made, still shows. Installed by the app (``python -m theseus_pl``), not on import: a library user keeps
everything.
"""

from __future__ import annotations

import logging
import warnings

# Lightning's own use of a torch pytree class that torch deprecated (printed on every fit and validate).
PYTREE_DEPRECATION = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
# Lightning's advertisement for its hosted logger, printed by every Trainer that has other loggers.
LITLOGGER_TIP = "💡 Tip: For seamless cloud logging and experiment tracking"
# Lightning cannot see that the data module restores the training order mid-epoch (training_order.py).
MID_EPOCH_RESUME = "You're resuming from a checkpoint that ended before the epoch ended"
# TheseusModule skips a batch that replaces no module (nothing to train) by returning None, on purpose.
SKIPPED_STEP = r"`training_step` returned `None`"


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
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropMessage(LITLOGGER_TIP))
