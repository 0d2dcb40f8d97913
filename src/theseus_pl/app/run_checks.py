"""Everything that can be known to be wrong with a run before it starts, found in one pass, said in one message.

Before any training and before W&B starts: first the settings (``settings_check``, built and checked once per run
and handed in here) and the models and data the run reads (``preflight``), together; then, when those can be
loaded, what needs them: the successor's depth and widths and the sequence length against the model (the library's
own checks, in config terms), a given predecessor's labels against the task, every row of every split (read and
tokenised now, cached for the run), and, for a method trained by the replacement schedule, whether it ends inside
the run.
"""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig
from transformers import AutoConfig, PretrainedConfig

from theseus_pl.app.config_terms import SUCCESSOR_SETTINGS, in_config_terms
from theseus_pl.app.methods import TheseusSettings
from theseus_pl.app.predecessor import check_fits_task
from theseus_pl.app.preflight import resource_problems
from theseus_pl.app.settings_check import RunSettings
from theseus_pl.core.replacing import module_sizes
from theseus_pl.core.successors.copied import intermediate_size_problem
from theseus_pl.core.successors.narrow_width import hidden_size_problem
from theseus_pl.data.datamodule import TextTaskDataModule, sample_rows


class RunRefused(ValueError):
    """Every problem found with a run, each naming the option or file and the fix; nothing was started."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            "The run cannot start (nothing was trained or logged):\n" + "\n".join(f"- {p}" for p in problems)
        )


def checked_datamodule(cfg: DictConfig, settings: RunSettings) -> TextTaskDataModule:
    """The run's data module, its splits read and tokenised; :class:`RunRefused` listing all problems otherwise.

    ``settings`` are the run's settings as :func:`~theseus_pl.app.settings_check.checked_settings` built them."""
    problems = settings.problems + resource_problems(cfg, settings.method)
    if problems:
        raise RunRefused(problems)
    start_model = cfg.model.predecessor or cfg.model.base
    datamodule: TextTaskDataModule = instantiate(cfg.data, tokenizer=start_model)
    problems = model_fit_problems(cfg, start_model, datamodule, settings)
    problems += data_problems(datamodule)
    if not problems:
        problems += schedule_problems(cfg, datamodule, settings)
    if problems:
        raise RunRefused(problems)
    return datamodule


def model_fit_problems(cfg: DictConfig, model: str, datamodule: TextTaskDataModule, settings: RunSettings) -> list[str]:
    """The successor depth, the sequence length and a given predecessor's labels against what the model has."""
    config = AutoConfig.from_pretrained(model)
    problems = []
    try:
        module_sizes(config.num_hidden_layers, settings.theseus.successor_layers)
    except ValueError as error:
        problems.append(in_config_terms(str(error), "theseus", ["successor_layers"]))
    positions = min(getattr(config, "max_position_embeddings", None) or 10**9, datamodule.tokenizer.model_max_length)
    if datamodule.task.max_length > positions:
        problems.append(f"data.max_length={datamodule.task.max_length} is more than {model} takes: {positions} tokens.")
    if cfg.model.predecessor:
        try:
            check_fits_task(cfg.model.predecessor, datamodule.task)
        except ValueError as error:
            problems.append(f"model.predecessor: {error}")
    if settings.method.takes_successor_settings:
        problems += successor_problems(settings.theseus, config)
    return problems


def successor_problems(theseus: TheseusSettings, config: PretrainedConfig) -> list[str]:
    """Narrower feed-forward and hidden widths against the predecessor's, for a family whose layout is known (the
    library's own checks, in config terms)."""
    fits = {"intermediate_size": intermediate_size_problem, "hidden_size": hidden_size_problem}
    problems = [fits[name](config, width) for name, width in theseus.widths.items()]
    return [in_config_terms(problem, "theseus.successor", SUCCESSOR_SETTINGS) for problem in problems if problem]


def data_problems(datamodule: TextTaskDataModule) -> list[str]:
    """Each split read and tokenised (then cached): a bad encoding, label, field count or an empty split, by file."""
    problems = []
    for split in ("train", *datamodule.task.eval_splits):
        try:
            datamodule.load(split)
        except (OSError, ValueError, RuntimeError) as error:  # the source's own message names the file and row
            problems.append(f"data: {error}")
    return problems


def schedule_problems(cfg: DictConfig, datamodule: TextTaskDataModule, settings: RunSettings) -> list[str]:
    """A method trained by the replacement schedule whose replacing phase cannot end inside the run, unless the
    user allows it; a learning rate restarted at the switch needs the switch to fall inside the run, after the
    warm-up."""
    if not settings.method.needs_schedule:
        return []
    switch_step = settings.schedule.switch_step
    total = total_steps(cfg, datamodule)
    problems = []
    warmup = int(cfg.optimizer.get("warmup_ratio", 0.0) * total)
    if settings.theseus.lr_schedule == "per_phase" and not warmup < switch_step < total:
        problems.append(
            f"theseus.lr_schedule=per_phase restarts the learning rate at the switch to successor fine-tuning, step "
            f"{switch_step}, which must lie after the warm-up ({warmup} steps) and before the last step ({total})."
        )
    if switch_step >= total and not cfg.get("allow_unfinished_schedule", False):
        problems.append(
            f"The replacement schedule reaches p = 1 at step {switch_step} but the run has {total} optimizer steps: "
            f"successor fine-tuning (phase 2) would never run. Raise trainer.max_steps above {switch_step}, make p "
            "reach 1 sooner (schedule_steps), or allow it with allow_unfinished_schedule=true."
        )
    return problems


def total_steps(cfg: DictConfig, datamodule: TextTaskDataModule) -> int:
    """The run's optimizer steps on one device: ``max_steps``, or fewer when ``max_epochs`` ends it first."""
    max_steps, max_epochs = cfg.trainer.get("max_steps", -1), cfg.trainer.get("max_epochs")
    if max_epochs is None or max_epochs < 0:
        return max_steps
    rows = len(sample_rows(datamodule.load("train"), datamodule.max_train_samples, datamodule.seed))
    epoch_steps = datamodule.batches_per_epoch(rows) // cfg.trainer.get("accumulate_grad_batches", 1)
    return min(max_steps if max_steps > 0 else max_epochs * epoch_steps, max_epochs * epoch_steps)
