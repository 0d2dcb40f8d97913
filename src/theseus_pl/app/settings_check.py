"""The options users type, checked for type and range before anything starts (see ``run_checks``).

Hydra types each override from its text (``optimizer.lr=abc`` is a string, ``theseus.successor_layers=2.5`` a
float), so a wrong value would otherwise surface as a TypeError deep in training, or worse, run: ``trainer.max_steps=0``
used to report an untrained successor as "100% retained".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hydra.utils import get_method
from omegaconf import DictConfig, ListConfig, OmegaConf

from theseus_pl.app.tracking.loggers import wandb_setting_problems
from theseus_pl.core.replacing import SuccessorInit
from theseus_pl.core.schedules import build_schedule
from theseus_pl.core.successors.copied import Importance
from theseus_pl.deployment.onnx_export import DeploymentError, require_onnxruntime
from theseus_pl.deployment.record import QUANTIZE_CHOICES, wanted

LR_SCHEDULES = ("one_decay", "per_phase")  # see conf/theseus/default.yaml
MAX_SEED = 2**32 - 1  # Lightning's seed_everything takes an unsigned 32-bit seed


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def positive_int(value: Any) -> bool:
    return _is_int(value) and value >= 1


def optional_positive_int(value: Any) -> bool:
    return value is None or positive_int(value)


def positive_number(value: Any) -> bool:
    return _is_number(value) and value > 0


def importable(value: Any) -> bool:
    """A dotted path Hydra can resolve to a callable (it imports the module)."""
    try:
        return isinstance(value, str) and callable(get_method(value))
    except Exception:  # whatever importing the named module raises
        return False


def validation_interval(value: Any) -> bool:
    return positive_int(value) or (isinstance(value, float) and 0 < value <= 1)


# option -> (rule, what a valid value is)
RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "seed": (lambda v: _is_int(v) and 0 <= v <= MAX_SEED, f"a whole number from 0 to {MAX_SEED}"),
    "threads": (optional_positive_int, "null (torch's default) or a whole number of threads, at least 1"),
    "theseus.successor_layers": (positive_int, "a whole number of layers, at least 1"),
    "theseus.init": (lambda v: v in {init.value for init in SuccessorInit},
                     "one of " + ", ".join(init.value for init in SuccessorInit)),
    "theseus.finetune_shared": (lambda v: isinstance(v, bool), "true or false"),
    "theseus.lr_schedule": (lambda v: v in LR_SCHEDULES, "one of " + ", ".join(LR_SCHEDULES)),
    "theseus.successor._target_": (importable, "the dotted path of an importable successor factory"),
    "theseus.successor.intermediate_size": (optional_positive_int, "null (the predecessor's) or a whole number of "
                                            "feed-forward neurons, at least 1"),
    "theseus.successor.hidden_size": (optional_positive_int, "null (the predecessor's) or a whole number of "
                                      "hidden dimensions, at least 1"),
    "theseus.successor.importance": (lambda v: v in {i.value for i in Importance},
                                     "one of " + ", ".join(i.value for i in Importance)),
    "optimizer.lr": (positive_number, "a number above 0, e.g. 2e-5"),
    "finetune.lr": (positive_number, "a number above 0, e.g. 2e-5"),
    "finetune.epochs": (positive_int, "a whole number of epochs, at least 1"),
    "data.batch_size": (positive_int, "a whole number, at least 1"),
    "data.eval_batch_size": (optional_positive_int, "null or a whole number, at least 1"),
    "data.max_length": (lambda v: v is None or (_is_int(v) and v >= 2), "null (the task's own) or at least 2 tokens"),
    "data.max_train_samples": (optional_positive_int, "null (all rows) or a whole number, at least 1"),
    "data.max_eval_samples": (optional_positive_int, "null (all rows) or a whole number, at least 1"),
    "trainer.val_check_interval": (validation_interval, "a whole number of steps, or a share of an epoch in (0, 1]"),
    "checkpoint.every_n_steps": (optional_positive_int, "null (at validations only) or a whole number, at least 1"),
    "checkpoint.keep": (lambda v: isinstance(v, bool), "true or false"),
    "allow_unfinished_schedule": (lambda v: isinstance(v, bool), "true or false"),
    "benchmark.batch_size": (positive_int, "a whole number of dev rows, at least 1"),
    "benchmark.repeats": (lambda v: _is_int(v) and v >= 0, "0 (no speed-up measured) or a whole number of pairs"),
    "deploy.onnx": (lambda v: isinstance(v, bool), "true or false"),
    "deploy.quantize": (lambda v: v in QUANTIZE_CHOICES, "null (fp32 only) or int8"),
    "deploy.sequence_length": (lambda v: v is None or (_is_int(v) and v >= 2), "null or at least 2 tokens"),
    "deploy.batch_sizes": (lambda v: isinstance(v, list | ListConfig) and len(v) > 0 and all(map(positive_int, v)),
                           "a list of batch sizes, each at least 1, e.g. [1,32]"),
    "deploy.repeats": (positive_int, "a whole number, at least 1"),
    "resume": (lambda v: v is True or v is False or v == "force",
               "true (continue), false (start afresh) or force (redo a finished run)"),
}  # fmt: skip


def setting_problems(cfg: DictConfig) -> list[str]:
    """Every problem with the options users set, each naming the option, its value and what is valid."""
    problems = []
    for key, (valid, expected) in RULES.items():
        value = OmegaConf.select(cfg, key, default=None)
        if not valid(value):
            problems.append(f"{key}={value!r} must be {expected}.")
    max_steps, max_epochs = cfg.trainer.get("max_steps"), cfg.trainer.get("max_epochs")
    if not (positive_int(max_steps) or (max_steps == -1 and positive_int(max_epochs))):
        problems.append(
            f"trainer.max_steps={max_steps!r} must be at least 1 (or -1 with trainer.max_epochs at least 1): a run "
            "with no training step would export an untrained successor."
        )
    try:
        build_schedule(**cfg.replacement)
    except (TypeError, ValueError) as error:
        problems.append(f"replacement: {error}")
    problems += wandb_setting_problems(OmegaConf.to_container(cfg.logger.wandb, resolve=True))
    if wanted(cfg.deploy):
        try:
            require_onnxruntime()
        except DeploymentError as error:
            problems.append(f"deploy: {error}")
    return problems
