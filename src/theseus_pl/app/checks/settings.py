"""The run's settings, each built from its config group and checked by itself, before anything starts.

Each group is a settings object that checks its own values when it is built and names every problem with its
fields (:class:`~theseus_pl.core.settings.SettingsError`): the method (the class ``method._target_`` names, see
``methods``), the ``theseus`` group (``methods.TheseusSettings``), the replacement schedule (``schedules``: the
library's classes), the deploy stage (``DeploySettings``) and W&B's settings; the run's plain options (seed, data,
trainer, ...) are :data:`RULES` here, in the same form. :func:`checked_settings` builds them all once per run,
gathers every problem in the config's terms (a library object's Python names become config keys) and hands the
built objects on, so the run uses what was checked; each kind's own checks (``kinds.task_model.checks``,
``kinds.language_model.checks``, ``kinds.embedding_model.checks``) add what needs the models and the data. Every
kind of run goes through the same rules; a setting that the run's kind or method does not read is refused with the
reason, never silently ignored.

Hydra types each override from its text (``optimizer.lr=abc`` is a string, ``theseus.successor_layers=2.5`` a
float), so a wrong value would otherwise surface as a TypeError deep in training, or worse, run: ``trainer.max_steps=0``
used to report an untrained successor as "100% retained".
"""

from __future__ import annotations

import difflib
import importlib.resources
import inspect
import pydoc
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from omegaconf import DictConfig, ListConfig, OmegaConf

from theseus_pl.app.config.kinds import KIND_KEY
from theseus_pl.app.config.resolvers import run_kind_name
from theseus_pl.app.config.run_folder import folder_problem
from theseus_pl.app.config.terms import SCHEDULE_SETTINGS, in_config_terms, naming_group
from theseus_pl.app.methods.method import (
    PREDECESSOR_TEACHER,
    CompressionMethod,
    SoftTargets,
    TheseusSettings,
    method_from_config,
)
from theseus_pl.app.methods.schedules import build_schedule
from theseus_pl.app.results.registry import kind_named
from theseus_pl.app.tracking.loggers import wandb_setting_problems
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.core.settings import (
    Rule,
    SettingsError,
    boolean,
    field_problems,
    number,
    one_of,
    optional_positive_int,
    positive_int,
    positive_number,
    whole_number,
)
from theseus_pl.deployment.onnx_export import DeploymentError, require_onnxruntime
from theseus_pl.deployment.openvino_export import require_openvino
from theseus_pl.deployment.record import DeploySettings, wanted

MAX_SEED = 2**32 - 1  # Lightning's seed_everything takes an unsigned 32-bit seed
T = TypeVar("T")


def share_or_count(value: Any) -> bool:
    """A whole number of batches (at least 1) or a share of an epoch in (0, 1]: how Lightning counts batches."""
    return positive_int(value) or (isinstance(value, float) and 0 < value <= 1)


def names(value: Any) -> bool:
    """A list of names (``[STS-B,SST-2]``): a single name typed without brackets is text, which would be read
    letter by letter."""
    return isinstance(value, list | ListConfig) and all(isinstance(name, str) for name in value)


def folder_name(value: Any) -> bool:
    """A name that becomes one folder (a run's ``outputs/<name>/``, its cache entries): a name with a ``/`` or a
    ``..`` in it wrote tokenised data outside the cache, and one of hundreds of characters failed as a file name."""
    return (isinstance(value, str) and 0 < len(value) <= 100 and value not in (".", "..")
            and not any(character in value for character in "/\\\0"))  # fmt: skip


def writable_folder(value: Any) -> bool:
    """A folder this process can make or write into (the run folder's own test, :func:`folder_problem`), and no text
    starting with ``~`` (no shell expands it here: a folder named ``~`` would be made). The cache is first written
    minutes into a run (after the data is read, when the predecessor is fine-tuned)."""
    if not isinstance(value, str) or not value or value.startswith("~") or "\0" in value:
        return False
    try:
        return folder_problem(Path(value), "paths.cache_dir") is None
    except (OSError, ValueError):  # a path the system cannot name (a NUL byte, a name too long)
        return False


WEIGHT_DECAY = Rule(lambda v: number(v) and v >= 0, "a number, 0 or more, e.g. 0.01")
WARMUP_SHARE = Rule(lambda v: number(v) and 0 <= v < 1, "a share of the steps in [0, 1), e.g. 0.1")

# The run's plain options (no settings object of their own), by config key.
RULES: dict[str, Rule] = {
    "seed": Rule(lambda v: whole_number(v) and 0 <= v <= MAX_SEED, f"a whole number from 0 to {MAX_SEED}"),
    "threads": Rule(optional_positive_int, "null (torch's default) or a whole number of threads, at least 1"),
    "activation_checkpointing": Rule(boolean, "true or false"),
    "check_steps": Rule(lambda v: whole_number(v) and v >= 0, "0 (no timing) or a whole number of steps to time"),
    "optimizer.lr": Rule(positive_number, "a number above 0, e.g. 2e-5"),
    "finetune.lr": Rule(positive_number, "a number above 0, e.g. 2e-5"),
    "finetune.epochs": Rule(positive_int, "a whole number of epochs, at least 1"),
    "finetune.steps": Rule(optional_positive_int, "null (no adaptation) or a whole number of steps, at least 1"),
    "finetune.weight_decay": WEIGHT_DECAY,
    "finetune.warmup_ratio": WARMUP_SHARE,
    "optimizer.weight_decay": WEIGHT_DECAY,
    "optimizer.warmup_ratio": WARMUP_SHARE,
    "data.batch_size": Rule(positive_int, "a whole number, at least 1"),
    "data.eval_batch_size": Rule(optional_positive_int, "null or a whole number, at least 1"),
    "data.max_length": Rule(lambda v: v is None or (whole_number(v) and v >= 2),
                            "null (the task's own) or at least 2 tokens"),
    "data.max_train_samples": Rule(optional_positive_int, "null (all rows) or a whole number, at least 1"),
    "data.max_eval_samples": Rule(optional_positive_int, "null (all rows) or a whole number, at least 1"),
    "data.max_eval_windows": Rule(optional_positive_int, "null (every held-out window) or a whole number, at least 1"),
    "data.num_workers": Rule(lambda v: whole_number(v) and v >= 0,
                             "0 (rows loaded in the training process) or a whole number of loader processes"),
    "data.task": Rule(lambda v: v is None or folder_name(v),
                      "null (named after your files), a GLUE task (e.g. RTE) or a name for your own data: one folder "
                      "name, without / or \\, not . or .., at most 100 characters"),
    "data.pairs": Rule(lambda v: isinstance(v, str) and bool(v),
                       "the GLUE similarity task whose training pairs are trained on, e.g. STS-B (one name)"),
    "data.window": Rule(lambda v: whole_number(v) and v >= 2,
                        "a whole number of tokens, at least 2 (a token and the one it predicts)"),
    # Options read as true or false: Hydra types "no" or "yes" as text, which Python would take as true.
    "data.regression": Rule(boolean, "true or false"),
    "data.group_by_length": Rule(boolean, "true or false"),
    "data.pad_to_max_length": Rule(boolean, "true or false"),
    "evaluation.single_modules": Rule(boolean, "true or false"),
    "callbacks.early_stopping.patience": Rule(positive_int, "a whole number of validations without gain, at least 1"),
    # Lightning takes these as they come and fails at train start or the first validation (a TypeError or its own)
    "callbacks.early_stopping.mode": Rule(one_of(("max", "min")), "max (a score) or min (a loss)"),
    "callbacks.stop_below.below": Rule(lambda v: v is None or number(v), "null (never) or a dev score, e.g. 70.0"),
    "callbacks.stop_below.after": Rule(lambda v: number(v) and 0 <= v <= 1,
                                       "a share of the run's steps from 0 to 1, e.g. 0.5"),
    "callbacks.progress_bar.refresh_rate": Rule(lambda v: whole_number(v) and v >= 0,
                                                "0 (no bar) or a whole number of batches between updates"),
    "trainer.log_every_n_steps": Rule(positive_int, "a whole number of steps, at least 1"),
    "trainer.num_sanity_val_steps": Rule(lambda v: whole_number(v) and v >= -1,
                                         "0 (none), a whole number of batches, or -1 (all)"),
    "data.seed": Rule(lambda v: whole_number(v) and 0 <= v <= MAX_SEED, f"a whole number from 0 to {MAX_SEED}"),
    # The model card's base_model and "the predecessor is ..." name it: text that is no hub id would be untrue there
    "model.hub_id": Rule(lambda v: v is None or _is_hub_id(v),
                         "null or the hub id of the model named, e.g. sentence-transformers/all-MiniLM-L6-v2"),
    "paths.cache_dir": Rule(writable_folder, "a folder you can write to, e.g. /data/theseus_pl_cache (its default is "
                                             "$THESEUS_PL_CACHE, else ~/.cache/theseus_pl; write $HOME, not ~)"),
    # null would draw the held-out rows anew in every process: a resumed run scored on others, some trained on
    "data.split_seed": Rule(lambda v: whole_number(v) and 0 <= v <= MAX_SEED, f"a whole number from 0 to {MAX_SEED}"),
    # A run that trains no step would export an untrained successor (see trainer.max_steps in checked_settings).
    "trainer.max_epochs": Rule(lambda v: v is None or v == -1 or positive_int(v),
                               "-1 (the run ends at trainer.max_steps) or a whole number of epochs, at least 1: 0 "
                               "trains nothing"),
    "trainer.limit_train_batches": Rule(lambda v: v is None or share_or_count(v),
                                        "a whole number of batches an epoch, at least 1, or a share of an epoch in "
                                        "(0, 1]: 0 trains nothing"),
    "trainer.accumulate_grad_batches": Rule(positive_int, "a whole number of batches a step, at least 1"),
    "trainer.val_check_interval": Rule(share_or_count,
                                       "a whole number of steps, or a share of an epoch in (0, 1]"),
    # Lightning's Trainer takes 0 and divides by it at the first epoch's end, after the data and predecessor are made
    "trainer.check_val_every_n_epoch": Rule(lambda v: v is None or positive_int(v),
                                            "null (validations counted in steps over the whole run) or a whole number "
                                            "of epochs, at least 1"),
    "checkpoint.every_n_steps": Rule(optional_positive_int,
                                     "null (at validations only) or a whole number, at least 1"),
    "checkpoint.keep": Rule(boolean, "true or false"),
    "allow_unfinished_schedule": Rule(boolean, "true or false"),
    "data.other_text.max_windows": Rule(optional_positive_int, "null (every window) or a whole number, at least 1"),
    "data.train_tasks": Rule(lambda v: v is None or names(v), "a list of GLUE tasks, e.g. [STS-B,SST-2], or []"),
    "data.corpora": Rule(lambda v: v is None or names(v), "a list of corpora, e.g. [convention_speeches], or []"),
    "evaluation.lm_eval.tasks": Rule(names, "a list of lm-eval task names, e.g. [sst2_local,rte_local], or []"),
    "evaluation.lm_eval.num_fewshot": Rule(lambda v: whole_number(v) and v >= 0,
                                           "a whole number of examples in each prompt, 0 or more"),
    "evaluation.lm_eval.limit": Rule(optional_positive_int, "null (every example) or a whole number, at least 1"),
    "evaluation.lm_eval.batch_size": Rule(positive_int, "a whole number, at least 1"),
    "benchmark.batch_size": Rule(positive_int, "a whole number of dev rows, at least 1"),
    "benchmark.repeats": Rule(lambda v: whole_number(v) and v >= 0,
                              "0 (no speed-up measured) or a whole number of pairs"),
    "resume": Rule(lambda v: v is True or v is False or v == "force",
                   "true (continue), false (start afresh) or force (redo a finished run)"),
}  # fmt: skip

# Options that only some config groups have (one data group's, a callback's, a trainer option added with +): checked
# where they are set, and there null is no value for them either.
WHERE_SET = {
    "data.split_seed",
    "data.pairs",
    "data.num_workers",
    "data.window",
    "data.regression",
    "data.group_by_length",
    "data.pad_to_max_length",
    "callbacks.early_stopping.patience",
    "callbacks.early_stopping.mode",
    "callbacks.progress_bar.refresh_rate",
    "callbacks.stop_below.below",
    "callbacks.stop_below.after",
    "data.seed",
    "model.hub_id",
    "trainer.accumulate_grad_batches",
}
ABSENT = object()


def _set_options(cfg: DictConfig) -> tuple[dict[str, Any], dict[str, Rule]]:
    """The values :data:`RULES` check, by key (an option that is not there is checked as None), and the rules that
    apply: those of :data:`WHERE_SET` only where the option is there."""
    values = {key: OmegaConf.select(cfg, key, default=ABSENT) for key in RULES}
    rules = {
        key: rule
        for key, rule in RULES.items()
        if not (key in WHERE_SET and values[key] is ABSENT) and not _copies_a_checked_option(cfg, key)
    }
    return {key: None if value is ABSENT else value for key, value in values.items()}, rules


def _is_hub_id(value: object) -> bool:
    """Whether ``value`` is written as a Hugging Face hub id (NAME or ORG/NAME), by the hub client's own rule."""
    try:
        validate_repo_id(value)  # type: ignore[arg-type]  # it raises for anything but such text
    except (HFValidationError, TypeError):
        return False
    return isinstance(value, str)


def _copies_a_checked_option(cfg: DictConfig, key: str) -> bool:
    """Whether ``key`` is an interpolation of another option :data:`RULES` checks (``data.seed: ${seed}``): a bad
    value is named once, where it was set."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    if not isinstance(node, DictConfig) or leaf not in node or not OmegaConf.is_interpolation(node, leaf):
        return False
    raw = OmegaConf.to_container(node, resolve=False)[leaf]
    return isinstance(raw, str) and raw.startswith("${") and raw[2:-1] in RULES


# The groups of plain options, each read key by key or whole by the code (AdamW and its schedule; the predecessor's
# fine-tuning or adaptation; the speed-up's timing; the checkpoints; the extra scores; the models the run starts
# from, its folders, its loggers): a key outside these would be passed on, a TypeError, or dropped unread while the
# record says it was set.
PLAIN_GROUPS = {
    "optimizer": ("lr", "weight_decay", "warmup_ratio"),
    "finetune": ("epochs", "lr", "weight_decay", "warmup_ratio", "steps"),
    "benchmark": ("batch_size", "repeats"),
    "checkpoint": ("every_n_steps", "keep"),
    "evaluation": ("single_modules", "lm_eval"),
    "evaluation.lm_eval": ("tasks", "glue_dir", "include_path", "num_fewshot", "limit", "batch_size"),
    "model": ("base", "predecessor", "hub_id", "gguf"),
    "paths": ("output_dir", "cache_dir"),
    "logger": ("wandb",),
    "logger.wandb": ("enabled", "project", "entity", "group", "name", "tags", "log_model", "mode", "init_timeout"),
}


def unknown_key_problems(cfg: DictConfig) -> list[str]:
    """Each key added to a plain group (``+optimizer.betas=...``) that nothing reads, with the nearest one that is."""
    problems = []
    for group, known in PLAIN_GROUPS.items():
        for key in OmegaConf.select(cfg, group, default=None) or {}:
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {group}.{near[0]}?" if near else f"its settings are {', '.join(known)}."
                problems.append(f"{group}.{key} is no setting of the {group} group: {hint}")
    return problems


def successor_depth_problems(successor_layers: Any, layers: int, holder: str = "the predecessor") -> list[str]:
    """``theseus.successor_layers`` against the ``layers`` of ``holder`` (the predecessor, or its encoder): fewer, and
    at least one. A value that is no whole number is the settings rule's to refuse."""
    if not whole_number(successor_layers) or 1 <= successor_layers < layers:
        return []
    return [f"theseus.successor_layers={successor_layers} must be between 1 and {layers - 1} ({holder} has {layers} "
            "layers)."]  # fmt: skip


def repeated_file_problems(cfg: DictConfig) -> list[str]:
    """The same file (or folder) given twice in ``data.files``: as a task's training and validation split, its dev
    score is on rows it trained on, which its card says it never did; in a decoder's text, every document is read
    twice and the held-out ones are also trained on."""
    files = OmegaConf.select(cfg, "data.files", default=None)
    if isinstance(files, DictConfig):
        named = [(f"data.files.{split}", path) for split, path in files.items() if isinstance(path, str)]
    elif isinstance(files, ListConfig):
        named = [(f"data.files[{i}]", path) for i, path in enumerate(files) if isinstance(path, str)]
    else:
        return []
    first: dict[Path, str] = {}
    problems = []
    for key, path in named:
        where = Path(path).expanduser().resolve()
        if where in first:
            problems.append(
                f"{key}={path} is {first[where]}'s file again: the scores would be on what the run trains on, which "
                "the model card says it never saw. Give each split (or text) its own file."
            )
        first.setdefault(where, key)
    return problems


def ignored_data_problems(cfg: DictConfig) -> list[str]:
    """``data.files`` or ``data.glue_dir`` beside a ``data.source`` (the demo's Rotten Tomatoes): the source is read and
    they are not, so a run on "your files" trained on the demo's rows without a word."""
    source = OmegaConf.select(cfg, "data.source", default=None)
    given = [key for key in ("data.files", "data.glue_dir") if OmegaConf.select(cfg, key, default=None)]
    if source is None or not given:
        return []
    name = str(source.get("_target_", "a source")).rsplit(".", 1)[-1] if isinstance(source, DictConfig) else source
    return [f"{' and '.join(given)}: not read, the data group reads {name} (data.source); add data.source=null to "
            f"read {' and '.join(given)} instead."]  # fmt: skip


def label_as_text_problems(cfg: DictConfig) -> list[str]:
    """``data.text_columns`` naming the label column: its labels would be tokenised as text (transformers refused the
    numbers in a traceback, twice) and it would be read as the labels as well."""
    text_columns = OmegaConf.select(cfg, "data.text_columns", default=None)
    label_column = OmegaConf.select(cfg, "data.label_column", default=None)
    if not isinstance(text_columns, ListConfig) or label_column not in text_columns:
        return []
    others = [str(column) for column in text_columns if column != label_column]
    fix = f"data.text_columns=[{','.join(others)}]" if others else "the columns holding the text"
    return [f"data.text_columns={list(text_columns)} names the label column {label_column!r} (data.label_column) as "
            f"text: name the text columns only, e.g. {fix}."]  # fmt: skip


def unknown_argument_problems(cfg: DictConfig) -> list[str]:
    """Each key of a group the run builds from its ``_target_`` (the data module, each callback, the successor
    factory) that the class does not take, with the nearest one it does, and a ``_target_`` that names nothing
    importable: Hydra's ``instantiate`` ended the run in a ``TypeError`` (unexpected keyword) or an import error once it
    had begun (``+data.max_lenght=64``, ``+callbacks.early_stopping.foo=1``)."""
    built = {"data": cfg.get("data"), "theseus.successor": OmegaConf.select(cfg, "theseus.successor", default=None)}
    built |= {f"callbacks.{name}": group for name, group in (cfg.get("callbacks") or {}).items()}
    problems = []
    for where, group in built.items():
        if not isinstance(group, DictConfig) or not isinstance(group.get("_target_"), str):
            continue
        target = pydoc.locate(group._target_)  # None where it names nothing (hydra's get_class logs an error too)
        if not callable(target):  # the successor factory's is a rule of the theseus settings, with its own words
            if where.startswith("callbacks."):
                problems.append(f"{where}._target_={group._target_}: no class or function of that name can be "
                                "imported.")  # fmt: skip
            continue
        try:
            parameters = inspect.signature(target).parameters.values()
        except (ValueError, TypeError):  # a builtin without a signature: instantiate is the judge
            continue
        if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters):
            continue  # takes any keyword
        taken = [parameter.name for parameter in parameters]
        for key in group:
            if str(key).startswith("_") or key in taken or (where == "data" and key == KIND_KEY):  # the app's
                continue
            near = difflib.get_close_matches(str(key), taken, n=1)
            hint = f"did you mean {where}.{near[0]}?" if near else f"it takes {', '.join(taken)}."
            problems.append(f"{where}.{key} is no setting of {group._target_.rsplit('.', 1)[-1]}: {hint}")
    return problems


@dataclass(frozen=True)
class RunSettings:
    """Every problem with a run's settings, and the settings objects built from its config (None where a group
    has problems): the run goes on with these."""

    problems: list[str]
    method: CompressionMethod | None = None
    theseus: TheseusSettings | None = None
    schedule: ReplacementSchedule | None = None
    deploy: DeploySettings | None = field(default=None, repr=False)


def checked_settings(cfg: DictConfig) -> RunSettings:
    """Each group's settings object built and checked, with every problem with the options users set, each naming
    the option, its value and what is valid."""
    problems = field_problems(*_set_options(cfg))
    max_steps, max_epochs = cfg.trainer.get("max_steps"), cfg.trainer.get("max_epochs")
    if not (positive_int(max_steps) or (max_steps == -1 and positive_int(max_epochs))):
        problems["trainer.max_steps"] = (
            f"trainer.max_steps={max_steps!r} must be at least 1 (or -1 with trainer.max_epochs at least 1): a run "
            "with no training step would export an untrained successor."
        )
    reported = [
        *problems.values(),
        *unknown_key_problems(cfg),
        *unknown_argument_problems(cfg),
        *repeated_file_problems(cfg),
        *label_as_text_problems(cfg),
        *ignored_data_problems(cfg),
    ]
    theseus = _built(cfg, "theseus", lambda values: TheseusSettings(**values), problems, reported)
    method = _built(cfg, "method", method_from_config, problems, reported)
    schedule = _built(cfg, "replacement", lambda values: build_schedule(**values), problems, reported,
                      SCHEDULE_SETTINGS)  # fmt: skip
    deploy = _built(cfg, "deploy", DeploySettings.from_config, problems, reported)
    reported += wandb_setting_problems(OmegaConf.to_container(cfg.logger.wandb, resolve=True))
    openvino = deploy.openvino if deploy is not None else cfg.deploy.get("openvino") is True  # auto settled in deploy
    extras = [require_onnxruntime, require_openvino] if openvino else [require_onnxruntime]
    for require in extras if wanted(cfg.deploy) else []:
        try:
            require()
        except DeploymentError as error:
            reported.append(f"deploy: {error}")
    if method is not None and theseus is not None:
        reported += _method_problems(cfg, method, theseus)
    return RunSettings(reported, method, theseus, schedule, deploy)


def _built(
    cfg: DictConfig,
    group: str,
    build: Callable[[dict[str, Any]], T],
    checked: dict[str, str],
    reported: list[str],
    arguments: Iterable[str] = (),
) -> T | None:
    """The settings object ``build`` makes of the (resolved) group; None, with its problems added to ``reported``
    in config terms, when it refuses them. A field whose value is another option's (``deploy.threads`` is
    ``${threads}``) and that option's problem is already reported is not reported again."""
    try:
        return build(OmegaConf.to_container(cfg[group], resolve=True))
    except SettingsError as error:
        for name, message in error.problems.items():
            if _interpolated_from(cfg[group], name) not in checked:
                reported.append(in_config_terms(message, group, [name]))
    except (TypeError, ValueError) as error:  # a library object's own check, or a key it does not take
        reported.append(naming_group(group, in_config_terms(str(error), group, arguments)))
    return None


def _interpolated_from(node: DictConfig, name: str) -> str | None:
    """The option ``name``'s value is taken from when it is a plain interpolation (``${threads}``), else None."""
    raw: Any = OmegaConf.to_container(node, resolve=False)
    for part in name.split("."):
        raw = raw.get(part) if isinstance(raw, dict) else None
    match = re.fullmatch(r"\$\{([\w.]+)\}", raw) if isinstance(raw, str) else None
    return match.group(1) if match else None


def _method_problems(cfg: DictConfig, method: CompressionMethod, theseus: TheseusSettings) -> list[str]:
    """Options that only some methods or one kind of run read, set where they would be ignored: each refused with
    why, never silently dropped. A method that does not compress the run's kind is refused first; then the kind's
    own rules (its registered ``method_problems``) judge the rest."""
    kind = run_kind_name(cfg)
    if kind not in method.compresses:
        return [_wrong_kind(method, kind)]
    registered = kind_named(kind)
    return registered.method_problems(cfg, method, theseus) if registered and registered.method_problems else []


def trains_nothing_problems(cfg: DictConfig, method: CompressionMethod) -> list[str]:
    """Activation checkpointing asked of a method that trains nothing: refused on every kind, first among its own."""
    if cfg.get("activation_checkpointing") is True and not method.trains:
        return [
            f"activation_checkpointing=true saves memory while training; method={method.name} trains nothing. Leave "
            "it false."
        ]
    return []


def teacher_of(method: CompressionMethod) -> str:
    """The teacher a method distils from: the predecessor for every method without soft targets."""
    return method.teacher if isinstance(method, SoftTargets) else PREDECESSOR_TEACHER


def _wrong_kind(method: CompressionMethod, kind: str) -> str:
    """The refusal of a method that does not compress the run's kind: what the method compresses and which methods
    compress this kind, each in the words its kind registered (else by the kind's name)."""

    def described(name: str) -> str:
        registered = kind_named(name)
        return registered.described if registered is not None and registered.described else f"runs of kind {name}"

    this = kind_named(kind)
    hint = this.methods_hint if this is not None and this.methods_hint else f"this run is of kind {kind}"
    *others, last = [described(name) for name in method.compresses]
    compressed = f"{', '.join(others)} and {last}" if others else last
    return f"method={method.name} compresses {compressed}; {hint}."


def encoder_gguf_problems(cfg: DictConfig) -> list[str]:
    """``deploy.gguf`` asked of an encoder's run (a task model's, a sentence-embedding model's): GGUF files are a
    decoder LM's, for llama.cpp; an encoder ships as ONNX."""
    if isinstance(cfg.deploy.get("gguf"), ListConfig) and cfg.deploy.gguf:  # else a rule says
        return [
            f"deploy.gguf={list(cfg.deploy.gguf)} writes a decoder LM for llama.cpp; an encoder ships as ONNX "
            "(deploy.onnx=true, deploy.quantize=int8). Leave it []."
        ]
    return []


def changed_from_defaults(cfg: DictConfig, group: str) -> list[str]:
    """``group.key=value`` for each key of the group that differs from the group's one shipped config
    (``conf/<group>/<name>.yaml``): what a user set on the command line or in an experiment."""
    folder = importlib.resources.files("theseus_pl.conf") / group
    shipped = [entry for entry in folder.iterdir() if entry.name.endswith(".yaml")]
    if len(shipped) != 1:
        return []
    defaults = OmegaConf.to_container(OmegaConf.create(shipped[0].read_text()), resolve=False)
    given = OmegaConf.to_container(cfg[group], resolve=False)  # as written: ${threads} is a default, not a choice
    return [
        f"{group}.{key}={_plain(value)}" for key, value in given.items() if key in defaults and defaults[key] != value
    ]


def _plain(value: Any) -> str:
    """A value as the command line writes it (``true``, ``null``, ``int8``)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
