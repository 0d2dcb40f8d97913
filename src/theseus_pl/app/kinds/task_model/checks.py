"""Everything that can be known to be wrong with a task-model run before it starts, found in one pass, said in one
message.

Before any training and before W&B starts, in one round: the settings (``checks.settings``, built and checked once
per run and handed in here), the models and data the run reads (``checks.resources``), the machine and the trainer
settings (``checks.trainer``), what the predecessor's config says (the successor's depth and widths, the sequence
length, its classifier head against the data's labels; no weights are loaded), and, for a method trained by the
replacement schedule, whether it ends inside the run. When anything is wrong, the data files are also read (not
tokenised) so that their problems come in the same message; otherwise they are read and tokenised (then cached for
the run) and only what needs the tokenizer can still refuse the run. Its method's options are judged by
:func:`task_model_method_problems`, which the kind registers.
"""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig, ListConfig
from transformers import AutoConfig, PretrainedConfig

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resources import checked_resources
from theseus_pl.app.checks.schedule import monitor_problems, schedule_problems, validation_problems
from theseus_pl.app.checks.settings import RunSettings, encoder_gguf_problems, teacher_of, trains_nothing_problems
from theseus_pl.app.checks.trainer import device_problems
from theseus_pl.app.config.kinds import data_module_settings
from theseus_pl.app.config.terms import SUCCESSOR_SETTINGS, in_config_terms, naming_group
from theseus_pl.app.methods.method import ADAPTED_TEACHER, BLOCK_INFLUENCE, CompressionMethod, TheseusSettings
from theseus_pl.app.predecessors.classifier import check_fits_task
from theseus_pl.core.memory import checkpointing_problem
from theseus_pl.core.replacing import module_sizes
from theseus_pl.core.settings import positive_int
from theseus_pl.core.successors.copied import intermediate_size_problem
from theseus_pl.core.successors.narrow_width import hidden_size_problem
from theseus_pl.data.datamodule import TextTaskDataModule, resolve_source, resolve_task, sample_rows
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.metrics import TaskMetrics


def checked_datamodule(cfg: DictConfig, settings: RunSettings) -> TextTaskDataModule:
    """The run's data module, its splits read and tokenised; :class:`RunRefused` listing all problems otherwise.

    ``settings`` are the run's settings as :func:`~theseus_pl.app.checks.settings.checked_settings` built them."""
    start_model = cfg.model.predecessor or cfg.model.base
    resources = checked_resources(cfg, settings.method)
    problems = settings.problems + [problem for found in resources.values() for problem in found]
    problems += device_problems(cfg)
    task = _task(cfg)
    if task is not None:
        problems += monitor_problems(cfg, TaskMetrics.for_task(task).logged)
    start_key = "model.predecessor" if cfg.model.predecessor else "model.base"
    if not resources[start_key]:
        try:
            config = AutoConfig.from_pretrained(start_model)
        except (OSError, ValueError) as error:  # a hub model's config that cannot be had, or one it cannot read
            problems.append(f"{start_key}={start_model!r}: its config cannot be read: {error}")
        else:
            problems += model_fit_problems(cfg, start_model, config, task, settings)
    if problems:
        read_problems, train_rows = file_problems(cfg, task) if task is not None else ([], None)
        problems += read_problems
        if not read_problems:
            problems += schedule_problems(cfg, settings, train_rows) + validation_problems(cfg, train_rows)
        raise RunRefused(list(dict.fromkeys(problems)))  # a missing file is found by the preflight and the read
    datamodule: TextTaskDataModule = instantiate(data_module_settings(cfg.data), tokenizer=start_model)
    problems = task_data_problems(datamodule) + length_problems(start_model, datamodule)
    if not problems:
        rows = len(sample_rows(datamodule.load("train"), datamodule.max_train_samples, datamodule.seed))
        problems += schedule_problems(cfg, settings, rows) + validation_problems(cfg, rows)
    if problems:
        raise RunRefused(problems)
    return datamodule


def _task(cfg: DictConfig) -> TaskSpec | None:
    """The run's task, None when the data settings do not make one (the preflight has said why)."""
    data = cfg.data
    try:
        return resolve_task(data.task, data.files, data.text_columns, data.labels, data.regression, data.metric,
                            data.max_length)  # fmt: skip
    except (TypeError, ValueError):
        return None


def model_fit_problems(
    cfg: DictConfig, model: str, config: PretrainedConfig, task: TaskSpec | None, settings: RunSettings
) -> list[str]:
    """The successor depth and widths, the sequence length and a given predecessor's head against the model's config
    (no weights loaded). The depth is checked even when the ``theseus`` group has other problems."""
    problems = []
    layers = settings.theseus.successor_layers if settings.theseus else cfg.theseus.get("successor_layers")
    if positive_int(layers):
        try:
            module_sizes(config.num_hidden_layers, layers)
        except ValueError as error:
            problems.append(in_config_terms(str(error), "theseus", ["successor_layers"]))
    positions = getattr(config, "max_position_embeddings", None)
    if task is not None and positions and task.max_length > positions:
        problems.append(f"data.max_length={task.max_length} is more than {model} takes: {positions} tokens.")
    if cfg.model.predecessor and task is not None:
        try:
            check_fits_task(cfg.model.predecessor, task)
        except ValueError as error:
            problems.append(f"model.predecessor: {error}")
    if settings.method is not None and settings.theseus is not None and settings.method.takes_successor_settings:
        problems += successor_problems(settings.theseus, config)
    if cfg.get("activation_checkpointing") is True and (problem := checkpointing_problem(config, causal_lm=False)):
        problems.append(problem)
    return problems


def length_problems(model: str, datamodule: TextTaskDataModule) -> list[str]:
    """The sequence length against what the tokenizer takes (its config's positions were checked before)."""
    limit = datamodule.tokenizer.model_max_length
    if datamodule.task.max_length > limit:
        return [f"data.max_length={datamodule.task.max_length} is more than {model}'s tokenizer takes: {limit} tokens."]
    return []


def successor_problems(theseus: TheseusSettings, config: PretrainedConfig) -> list[str]:
    """Narrower feed-forward and hidden widths against the predecessor's, for a family whose layout is known (the
    library's own checks, in config terms)."""
    fits = {"intermediate_size": intermediate_size_problem, "hidden_size": hidden_size_problem}
    problems = [fits[name](config, width) for name, width in theseus.widths.items()]
    return [in_config_terms(problem, "theseus.successor", SUCCESSOR_SETTINGS) for problem in problems if problem]


def task_data_problems(datamodule: TextTaskDataModule) -> list[str]:
    """Each split read and tokenised (then cached): a bad encoding, label, field count or an empty split, by file."""
    problems = []
    for split in ("train", *datamodule.task.eval_splits):
        try:
            datamodule.load(split)
        except (OSError, ValueError, RuntimeError) as error:  # the source's own message names the file and row
            problems.append(naming_group("data", str(error)))
    return problems


def file_problems(cfg: DictConfig, task: TaskSpec) -> tuple[list[str], int | None]:
    """Each split of a local source read, not tokenised (the tokenizer may be what is missing): the problems, and
    the training rows the run would use (None when the split cannot be read, or the data is on the hub)."""
    data = cfg.data
    if not (data.files or data.glue_dir or data.get("source")):
        return [], None  # the hub: read only when the run starts
    source = (instantiate(data.source) if data.get("source")
              else resolve_source(task, data.glue_dir, data.files, data.label_column, data.hub_dataset))  # fmt: skip
    problems, train_rows = [], None
    for split in ("train", *task.eval_splits):
        try:
            rows = source.read(task, split)
        except (OSError, ValueError, RuntimeError) as error:
            problems.append(naming_group("data", str(error)))
            continue
        if split == "train":
            limit = data.max_train_samples if positive_int(data.max_train_samples) else None
            train_rows = min(len(rows), limit or len(rows))
    return problems, train_rows


def task_model_method_problems(cfg: DictConfig, method: CompressionMethod, theseus: TheseusSettings) -> list[str]:
    """What a task model's run refuses of its method's options: an adapted teacher (its predecessor is fine-tuned on
    the task already), Theseus-only evaluation and successor shapes on other methods, and the task's own rules."""
    if problems := trains_nothing_problems(cfg, method):
        return problems
    if teacher_of(method) == ADAPTED_TEACHER:
        return [
            "method.teacher=adapted adapts a decoder LM's predecessor to its text; an encoder's predecessor is "
            "already fine-tuned on the task and is the teacher. Leave method.teacher=predecessor."
        ]
    problems = _task_problems(cfg, theseus)
    if cfg.evaluation.single_modules is True and not method.replaces_modules:
        problems.append("evaluation.single_modules=true scores Theseus modules: it needs method=theseus.")
    if not method.takes_successor_settings:
        problems += [
            f"theseus.successor.{name}={width} shapes Theseus successors; method={method.name} builds its student "
            "from whole predecessor layers (depth only). Leave it null."
            for name, width in theseus.widths.items()
        ]
    return problems


def _task_problems(cfg: DictConfig, theseus: TheseusSettings) -> list[str]:
    """Settings a task-model run does not read."""
    problems = []
    if cfg.finetune.get("steps") is not None:
        problems.append(
            f"finetune.steps={cfg.finetune.steps} adapts a decoder LM's predecessor to its text; an encoder's "
            "predecessor is fine-tuned for finetune.epochs. Leave it null."
        )
    problems += encoder_gguf_problems(cfg)
    if theseus.init == BLOCK_INFLUENCE:
        problems.append(
            f"theseus.init={BLOCK_INFLUENCE} starts successors from the layers of most block influence on "
            "language-model windows: decoder-LM runs only. Use bottom, top or every_other."
        )
    if isinstance(cfg.evaluation.lm_eval.tasks, ListConfig) and cfg.evaluation.lm_eval.tasks:  # else a rule says
        problems.append(
            f"evaluation.lm_eval.tasks={list(cfg.evaluation.lm_eval.tasks)} scores a decoder LM with "
            "lm-evaluation-harness; an encoder run is scored on its own task. Leave it []."
        )
    return problems
