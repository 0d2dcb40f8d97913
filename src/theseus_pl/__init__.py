"""theseus_pl: compress a fine-tuned Transformer by progressive module replacing (BERT-of-Theseus).

The library is :mod:`theseus_pl.core` (torch and transformers only); its names are importable from here::

    from theseus_pl import TheseusModel, successor_factory, CurriculumSchedule, load_successor

and so are the Lightning pieces that train it on your data: ``TheseusModule`` and ``TextTaskDataModule`` (for
a decoder LM, ``LanguageModelingDataModule``).
They load on first use, so ``import theseus_pl`` (and ``python -m theseus_pl --help``) stays quick, and using the
core alone imports no Lightning.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_EXPORTS = {
    "TheseusModel": "theseus_pl.core.replacing",
    "SuccessorInit": "theseus_pl.core.replacing",
    "module_layer_ranges": "theseus_pl.core.replacing",
    "ConstantSchedule": "theseus_pl.core.schedules",
    "CurriculumSchedule": "theseus_pl.core.schedules",
    "AntiCurriculumSchedule": "theseus_pl.core.schedules",
    "successor_factory": "theseus_pl.core.successors",
    "copied_layer": "theseus_pl.core.successors",
    "feed_forward_block": "theseus_pl.core.successors",
    "Importance": "theseus_pl.core.successors",
    "RunAware": "theseus_pl.core.successors",
    "Reshaping": "theseus_pl.core.successors",
    "Family": "theseus_pl.core.families",
    "FeedForward": "theseus_pl.core.families",
    "Attention": "theseus_pl.core.families",
    "register_family": "theseus_pl.core.families",
    "find_layer_stack": "theseus_pl.core.families",
    "save_successor": "theseus_pl.core.io",
    "load_successor": "theseus_pl.core.io",
    "TheseusModule": "theseus_pl.lightning.modules",
    "TextTaskDataModule": "theseus_pl.data.datamodule",
    "LanguageModelingDataModule": "theseus_pl.data.language_model",
}
__all__ = [  # the names of _EXPORTS (a literal list, so that tools read it)
    "AntiCurriculumSchedule",
    "Attention",
    "ConstantSchedule",
    "CurriculumSchedule",
    "Family",
    "FeedForward",
    "Importance",
    "LanguageModelingDataModule",
    "Reshaping",
    "RunAware",
    "SuccessorInit",
    "TextTaskDataModule",
    "TheseusModel",
    "TheseusModule",
    "copied_layer",
    "feed_forward_block",
    "find_layer_stack",
    "load_successor",
    "module_layer_ranges",
    "register_family",
    "save_successor",
    "successor_factory",
]

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from theseus_pl.core.families import Attention, Family, FeedForward, find_layer_stack, register_family
    from theseus_pl.core.io import load_successor, save_successor
    from theseus_pl.core.replacing import SuccessorInit, TheseusModel, module_layer_ranges
    from theseus_pl.core.schedules import AntiCurriculumSchedule, ConstantSchedule, CurriculumSchedule
    from theseus_pl.core.successors import (
        Importance,
        Reshaping,
        RunAware,
        copied_layer,
        feed_forward_block,
        successor_factory,
    )
    from theseus_pl.data.datamodule import TextTaskDataModule
    from theseus_pl.data.language_model import LanguageModelingDataModule
    from theseus_pl.lightning.modules import TheseusModule


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'theseus_pl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # found once
    return value
