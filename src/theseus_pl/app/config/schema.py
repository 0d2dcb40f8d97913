"""The settings a run reads, typed: the groups every kind shares (:class:`RunConfig`); each kind adds its ``data``
group in its own folder (``kinds/*/config.py``).

A kind reads its composed config through these types (``RunKind.config``), in Hydra's structured-config way: the
object is the composed ``DictConfig`` itself, read as the dataclass, so each value is looked up when the run reads
it and not before. A setting no run reads therefore stays unread, which the every-setting-is-read test relies on
(an object filled from every key at the start would read them all). The tests validate every experiment against
its kind's schema (:func:`config_problems`), so a key or a type the schema does not describe is found there.

The groups already built into settings objects by the checks (``theseus``, ``method``, ``replacement``,
``deploy``) are read through those (``RunSettings``) and are not described again here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf


@dataclass
class ModelConfig:
    """The model compressed: a base to fine-tune first, or a fine-tuned predecessor; a decoder LM may come as a GGUF
    file instead. ``hub_id`` names the shipped model on the hub (a card's ``base_model``)."""

    base: str | None = MISSING
    predecessor: str | None = MISSING
    hub_id: str | None = MISSING
    gguf: str | None = None  # decoder LMs only


@dataclass
class FinetuneConfig:
    """The predecessor's fine-tuning on the task (encoders) or its adaptation to the text (decoders: ``steps``)."""

    epochs: int = MISSING
    lr: float = MISSING
    weight_decay: float = MISSING
    warmup_ratio: float = MISSING
    steps: int | None = None


@dataclass
class OptimizerConfig:
    """The successor's optimizer (AdamW)."""

    lr: float = MISSING
    weight_decay: float = MISSING
    warmup_ratio: float = MISSING


@dataclass
class CheckpointConfig:
    """The resumable checkpoint's interval, and whether the best checkpoint outlives the finished run."""

    every_n_steps: int = MISSING
    keep: bool = MISSING


@dataclass
class LmEvalConfig:
    """lm-eval's harness tasks a decoder LM is scored on (none: not scored), and how."""

    tasks: list[str] = field(default_factory=list)
    glue_dir: str | None = None
    include_path: str | None = None
    num_fewshot: int = 0
    limit: int | None = None
    batch_size: int = 8


@dataclass
class EvaluationConfig:
    """What the finished successor is scored on beyond its dev score."""

    single_modules: bool = MISSING
    lm_eval: LmEvalConfig = field(default_factory=LmEvalConfig)


@dataclass
class BenchmarkConfig:
    """The PyTorch speed-up measurement: rows a batch, and repeats (0: not measured)."""

    batch_size: int = MISSING
    repeats: int = MISSING


@dataclass
class PathsConfig:
    """The run's folder, and the cache of predecessors and tokenised data shared by every run."""

    output_dir: str = MISSING
    cache_dir: str = MISSING


@dataclass
class LoggerConfig:
    """The loggers' settings: W&B's (``logger.wandb``), checked and read by the tracking wing."""

    wandb: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunConfig:
    """The groups every kind of run reads. ``trainer`` and ``callbacks`` are Lightning's (the Trainer's arguments,
    the callbacks Hydra instantiates), typed by Lightning; ``data`` is each kind's own."""

    seed: int = MISSING
    threads: int | None = None
    activation_checkpointing: bool = False
    ablation: Any = None  # the ablation's name, recorded with the run (conf/ablation)
    model: ModelConfig = field(default_factory=ModelConfig)
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    trainer: dict[str, Any] = field(default_factory=dict)
    callbacks: dict[str, Any] = field(default_factory=dict)
    data: Any = None  # each kind's own group (its RunConfig subclass says which)


def config_problems(cfg: DictConfig, schema: type[RunConfig]) -> list[str]:
    """Where the composed (and resolved) ``cfg`` departs from ``schema`` in the groups it describes: a key it does
    not declare, or a value of another type, in OmegaConf's words (empty: none)."""
    described = [f.name for f in fields(schema) if f.name in cfg]
    try:
        OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.masked_copy(cfg, described))
    except Exception as error:  # OmegaConf's ValidationError and ConfigKeyError, each naming the key
        return [str(error).splitlines()[0] + f" ({schema.__name__})"]
    return []
