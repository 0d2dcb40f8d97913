"""``results.json`` of a decoder-LM run: held-out perplexity and agreement with the predecessor, speed, samples.

:class:`LanguageModelResults` is the body of the :mod:`~theseus_pl.app.results.envelope` for this kind (``kind``
``language_model``), written by :mod:`theseus_pl.app.kinds.language_model.run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from theseus_pl.app.config.kinds import LANGUAGE_MODEL
from theseus_pl.app.results.envelope import Hardware, Keys, RunRecord, WandbLink, envelope_fields, trusted
from theseus_pl.app.results.number_text import shown
from theseus_pl.core.memory_record import PeakMemory
from theseus_pl.core.timing import was_busy
from theseus_pl.deployment.record import LEFT_OUT_AT_DEFAULT

SIDES = ("predecessor", "successor")


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
    # lm-evaluation-harness scores (evaluation.lm_eval.tasks), task -> metric -> value: {"sst2_local": {"acc": 0.71,
    # "acc_stderr": 0.015}}; None where none were scored. Files written before it hold zero_shot_sst2 instead, the
    # hand-written check sst2_local replaced (the same prompt and answers: 71.22 % for SmolLM2 by both): read as
    # sst2_local's acc.
    lm_eval: dict[str, dict[str, float]] | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    # perplexity and nll (and the successor's kl and agreement) on the other held-out text (data.other_text), if scored
    other_text: dict[str, float] | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)


@dataclass(kw_only=True)
class LanguageModelData:
    source: str
    window: int
    train_windows: int
    eval_windows: int
    eval_tokens: int  # held-out tokens predicted: every method is scored on the same ones
    train_tokens: int  # tokens the method trained on (steps x batch x window); 0 for a method that does not train
    # The other held-out text (data.other_text), its windows and tokens predicted; None where none was scored.
    other_source: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    other_eval_windows: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    other_eval_tokens: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    # The tokens the adapted teacher (method.teacher=adapted) trained on: finetune.steps batches of data.batch_size
    # windows on one device, never accumulated; None without one.
    teacher_train_tokens: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)


@dataclass(kw_only=True)
class GenerationSample:
    prompt: str
    predecessor: str
    successor: str


@dataclass(kw_only=True)
class LanguageModelResults(RunRecord):
    """One decoder-LM run's ``results.json``."""

    kind: ClassVar[str] = LANGUAGE_MODEL
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    predecessor: LanguageModelSide
    successor: LanguageModelSide
    # The predecessor's hub id (model.hub_id, or the hub id named); None for a folder, and in files written before it.
    base_model: str | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    data: LanguageModelData
    # The predecessor adapted to the training text (method.teacher=adapted: the distillation's teacher), scored as the
    # successor is; None where the run made none.
    teacher: LanguageModelSide | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    steps: int  # the model scored is the last step's (no choice among checkpoints on the held-out windows)
    resumed_from: str | None = None  # the checkpoint an interrupted run went on from
    schedule: str | None = None
    # Optimizer steps after the switch to p = 1 (phase 2: the successor alone, shared modules trained where
    # theseus.finetune_shared): 0 where the run ended first (allow_unfinished_schedule); None without a schedule,
    # or in files written before it.
    successor_finetuning_steps: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    speed: dict[str, float] | None = None  # core.timing.generation_speed: prefill and decode tokens/s, speed-ups
    sample: GenerationSample | None = None
    # The successor as GGUF files (deploy.gguf): a row per type, checked against PyTorch and timed in llama.cpp
    # (deployment.gguf_stage.deploy_gguf); None where none was asked for.
    gguf: list[dict[str, Any]] | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    seed: int
    hardware: Hardware | None = None
    wandb: WandbLink | None = None
    failed_steps: dict[str, str] = field(default_factory=dict)
    # The run's peak memory (core.memory): resident set, CUDA's allocated peak; None in files written before it.
    peak_memory: PeakMemory | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    wall_seconds: float | None = None
    folder: Path | None = field(default=None, compare=False, repr=False)  # where it was read from; not written

    def summary(self) -> dict[str, float]:
        """The headline numbers as flat ``final/*`` metrics (those known)."""
        summary = {
            "final/predecessor_perplexity": self.predecessor.perplexity,
            "final/successor_perplexity": self.successor.perplexity,
            "final/kl": self.successor.kl,
            "final/agreement": self.successor.agreement,
            "final/train_tokens": self.data.train_tokens,
            "final/teacher_perplexity": self.teacher.perplexity if self.teacher else None,
            "final/peak_memory_mb": self.peak_memory.cpu_mb if self.peak_memory else None,
            "final/peak_gpu_memory_mb": self.peak_memory.gpu_mb if self.peak_memory else None,
            "final/params_predecessor": self.predecessor.params,
            "final/params_successor": self.successor.params,
            **{f"final/{name}": value for name, value in (self.trusted_speed or {}).items()
               if name.endswith("speedup")},
            **{f"final/{side}_{task}_{metric}": value for side in SIDES
               for task, metrics in (getattr(self, side).lm_eval or {}).items()
               for metric, value in metrics.items() if not metric.endswith("_stderr")},
            **{f"final/{side}_other_{name}": value for side in SIDES
               for name, value in (getattr(self, side).other_text or {}).items() if name != "nll"},
            **{f"final/gguf_{row['type']}_{name}": row[name] for row in self.gguf or []
               for name in ("mib", "agreement", "perplexity")},
            **{f"final/gguf_{row['type']}_llama_cpp_{name}": value for row in self.gguf or []
               for name, value in (row.get("llama_cpp") or {}).items()
               if name.endswith("perplexity")
               or (name.endswith("speedup") and not was_busy(row["llama_cpp"].get("other_cores")))},
        }  # fmt: skip
        return {key: float(value) for key, value in summary.items() if value is not None}

    @property
    def trusted_speed(self) -> dict[str, float] | None:
        """The speed figures, where they were timed on a machine no other process kept busy (None otherwise)."""
        return trusted(self.speed)

    def successor_in_words(self) -> str:
        return f"decoder LM, {self.successor.layers}-layer successor"

    def headline(self) -> str:
        """The run in one line; a figure the file holds as null (a perplexity that was inf or NaN: results.json
        writes a number that is not finite as null) as n/a: formatting the None it reads back as raised TypeError and
        ended ``report --dry-run``, which lists each run by it."""
        predecessor, successor = self.predecessor, self.successor
        agreement = None if successor.agreement is None else 100 * successor.agreement
        return (
            f"{self.method}: held-out perplexity {shown(predecessor.perplexity, '.2f')} (predecessor) -> "
            f"{shown(successor.perplexity, '.2f')} (successor), KL {shown(successor.kl, '.3f')}, "
            f"agreement {shown(agreement, '.1f', '%')}, "
            f"{predecessor.layers} -> {successor.layers} layers"
            + (
                f"; on {self.data.other_source}: perplexity {shown(predecessor.other_text['perplexity'], '.2f')} "
                f"-> {shown(successor.other_text['perplexity'], '.2f')}, "
                f"KL {shown(successor.other_text['kl'], '.3f')}"
                if successor.other_text and predecessor.other_text
                else ""
            )
        )

    def objective(self) -> float | None:
        """The successor's held-out perplexity: lower is better."""
        return self.successor.perplexity

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LanguageModelResults:
        """A record from the file's layout, of any schema version."""
        read = Keys(data, "")
        sample = read.nested_if_given("sample")
        return cls(
            **envelope_fields(read),
            **{side: _side(read.nested(side)) for side in SIDES},
            teacher=_side(teacher) if (teacher := read.nested_if_given("teacher")) else None,
            base_model=read.optional("base_model"),
            data=LanguageModelData(**read.nested("data").pick(LanguageModelData)),
            speed=read.optional("speed"),
            gguf=read.optional("gguf"),
            sample=GenerationSample(**sample.pick(GenerationSample)) if sample else None,
        )


def _side(read: Keys) -> LanguageModelSide:
    side = LanguageModelSide(**read.pick(LanguageModelSide))
    zero_shot = read.optional("zero_shot_sst2")
    if zero_shot is not None and side.lm_eval is None:
        side.lm_eval = {"sst2_local": {"acc": zero_shot}}
    return side
