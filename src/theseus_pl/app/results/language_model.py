"""``results.json`` of a decoder-LM run: held-out perplexity and agreement with the predecessor, speed, samples.

Written by :mod:`theseus_pl.app.run.language_model` with :func:`~theseus_pl.app.results.task_model.write_record`;
``kind`` tells it from an encoder run's record (:class:`~theseus_pl.app.results.task_model.RunResults`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from theseus_pl.app.results.task_model import Hardware, WandbLink

LANGUAGE_MODEL = "language_model"  # the ``kind`` that tells a decoder-LM run's results.json from an encoder run's


@dataclass(kw_only=True)
class LanguageModelSide:
    """One of the two models, on the held-out windows."""

    dir: str
    layers: int
    params: int
    perplexity: float
    nll: float  # mean negative log-likelihood per held-out token, in nats
    kl: float | None = None  # mean KL(predecessor || this model) per token, in nats (successor only)
    agreement: float | None = None  # share of tokens where both models' most likely next token is the same
    origin: str | None = None  # predecessor: "gguf" (converted from a GGUF file) or "given" (a folder or hub id)
    zero_shot_sst2: float | None = None  # SST-2 dev accuracy zero-shot (evaluation.zero_shot_glue_dir), if scored


@dataclass(kw_only=True)
class LanguageModelData:
    source: str
    window: int
    train_windows: int
    eval_windows: int
    eval_tokens: int  # held-out tokens predicted: every method is scored on the same ones
    train_tokens: int  # tokens the method trained on (steps x batch x window); 0 for a method that does not train


@dataclass(kw_only=True)
class GenerationSample:
    prompt: str
    predecessor: str
    successor: str


@dataclass(kw_only=True)
class LanguageModelResults:
    kind: str = LANGUAGE_MODEL
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    predecessor: LanguageModelSide
    successor: LanguageModelSide
    data: LanguageModelData
    steps: int  # the model scored is the last step's (no choice among checkpoints on the held-out windows)
    resumed_from: str | None = None  # the checkpoint an interrupted run went on from
    schedule: str | None = None
    speed: dict[str, float] | None = None  # core.timing.generation_speed: prefill and decode tokens/s, speed-ups
    sample: GenerationSample | None = None
    seed: int
    hardware: Hardware
    wandb: WandbLink | None = None
    failed_steps: dict[str, str] = field(default_factory=dict)
    wall_seconds: float | None = None


def language_model_summary(results: LanguageModelResults) -> dict[str, float]:
    """The headline numbers as flat ``final/*`` metrics for the W&B summary and the CSV log's last row."""
    summary = {
        "final/predecessor_perplexity": results.predecessor.perplexity,
        "final/successor_perplexity": results.successor.perplexity,
        "final/kl": results.successor.kl,
        "final/agreement": results.successor.agreement,
        "final/train_tokens": results.data.train_tokens,
        "final/params_predecessor": results.predecessor.params,
        "final/params_successor": results.successor.params,
        **{f"final/{name}": value for name, value in (results.speed or {}).items() if name.endswith("speedup")},
        **{
            f"final/{side}_zero_shot_sst2": getattr(results, side).zero_shot_sst2
            for side in ("predecessor", "successor")
            if getattr(results, side).zero_shot_sst2 is not None
        },
    }
    return {key: float(value) for key, value in summary.items() if value is not None}


def read_language_model_results(path: Path) -> LanguageModelResults:
    """The record in ``path``, as :func:`~theseus_pl.app.results.task_model.write_record` wrote it."""
    data = json.loads(Path(path).read_text())
    sides = {name: LanguageModelSide(**data[name]) for name in ("predecessor", "successor")}
    nested = {
        "data": LanguageModelData(**data["data"]),
        "sample": GenerationSample(**data["sample"]) if data.get("sample") else None,
        "hardware": Hardware(**data["hardware"]),
        "wandb": WandbLink(**data["wandb"]) if data.get("wandb") else None,
    }
    kept = {key: value for key, value in data.items() if key != "schema_version" and key not in {*sides, *nested}}
    return LanguageModelResults(**kept, **sides, **nested)
