"""What ``python -m theseus_pl`` prints: each line once, the tool's own lines first, third-party chatter only with
``--verbose``.

Lightning's ``lightning`` package gives its logger a console handler of its own on import, so every Lightning
line was printed twice (once by it, once by Hydra's handler on the root logger); here the root logger prints
them alone. Lightning's INFO lines (the accelerators found, why a fit stopped) and transformers' progress bars
for loading and writing weights say nothing a user acts on: shown with ``--verbose`` only.
"""

from __future__ import annotations

import logging

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric", "lightning_fabric")


class ConsoleFormatter(logging.Formatter):
    """``12:03:04 message`` for information; ``12:03:04 WARNING: message`` where the level matters."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno >= logging.WARNING:
            time, _, message = text.partition(" ")
            return f"{time} {record.levelname}: {message}"
        return text


def configure_console(verbose: bool) -> None:
    """Once Lightning and transformers are imported: one handler per line, and the chatter off unless ``verbose``."""
    import transformers

    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        if logging.getLogger().handlers:  # the app's (Hydra's) handlers print Lightning's lines
            for handler in [h for h in logger.handlers if type(h) is logging.StreamHandler]:
                logger.removeHandler(handler)
            logger.propagate = True
        logger.setLevel(logging.INFO if verbose else logging.WARNING)
    if not verbose:
        transformers.logging.disable_progress_bar()
