"""``results.json`` of a sentence-embedding run: STS-B dev Spearman of both models, the successor's fidelity to its
teacher, and sentences per second.

:class:`EmbeddingModelResults` is the body of the :mod:`~theseus_pl.app.results.envelope` for this kind (``kind``
``embedding_model``), written by :mod:`theseus_pl.app.kinds.embedding_model.run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from theseus_pl.app.config.kinds import EMBEDDING_MODEL
from theseus_pl.app.results.deployment_block import deployment_from
from theseus_pl.app.results.envelope import Hardware, Keys, RunRecord, WandbLink, envelope_fields, trusted
from theseus_pl.app.results.number_text import known, shown
from theseus_pl.app.results.search_finding import SearchedRun, SearchFinding, read_search_finding
from theseus_pl.core.memory_record import PeakMemory
from theseus_pl.deployment.record import LEFT_OUT_AT_DEFAULT, Deployment

SIDES = ("predecessor", "successor")
TEACHER_VECTORS_LOSS = "the mean squared error to the teacher's sentence vectors"
PAIRS_LOSS = "sentence-transformers' CoSENT loss on the labelled pairs' cosine similarities"


@dataclass(kw_only=True)
class EmbeddingSide:
    """One of the two sentence-transformers models."""

    dir: str
    layers: int
    params: int
    dimensions: int  # the sentence vector's size: the same on both sides (the successor keeps the pooling)
    sts: float | None  # STS-B dev: Spearman of the pairs' cosine similarities with the gold scores, x 100
    # Against the predecessor's vectors on the held-out training sentences (successor only): the mean squared
    # difference per dimension, and the mean cosine of the two vectors (1: the same direction).
    mse: float | None = None
    cosine: float | None = None


@dataclass(kw_only=True)
class EmbeddingData:
    source: str  # the training sentences in words
    train_sentences: int
    held_out_sentences: int  # never trained on: validation and fidelity
    max_length: int  # tokens a sentence is cut to, in training and in the teacher's vectors
    sts_pairs: int  # STS-B dev pairs scored
    train_sentences_seen: int  # steps x batch: sentences the method trained on (0 for one that does not train)
    # What the methods trained on, in words; on labelled pairs (data=sentence_pairs) also how many training pairs.
    loss: str = field(default=TEACHER_VECTORS_LOSS, metadata=LEFT_OUT_AT_DEFAULT)
    train_pairs: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)


@dataclass(kw_only=True)
class EmbeddingModelResults(RunRecord):
    """One sentence-embedding run's ``results.json``."""

    kind: ClassVar[str] = EMBEDDING_MODEL
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    predecessor: EmbeddingSide
    successor: EmbeddingSide
    kept_layers: list[int] | None = None  # the predecessor layers the successor started as
    base_model: str | None = None  # the predecessor's hub id, where known: the model card's base_model
    data: EmbeddingData
    steps: int
    best_step: int | None = None  # the step of the checkpoint scored (best held-out cosine), where one was chosen
    resumed_from: str | None = None
    schedule: str | None = None
    # Optimizer steps after the switch to p = 1 (phase 2: the successor alone, shared modules trained where
    # theseus.finetune_shared): 0 where the run ended first (allow_unfinished_schedule); None without a schedule,
    # or in files written before it.
    successor_finetuning_steps: int | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    # Sentences per second of each model at batch 1 (one sentence at a time, unpadded) and 32 (batches sorted by
    # length) on STS-B dev sentences, the speed-ups, and other_cores (core.timing: busy above 0.25).
    speed: dict[str, float] | None = None
    seed: int
    hardware: Hardware | None = None
    wandb: WandbLink | None = None
    failed_steps: dict[str, str] = field(default_factory=dict)
    peak_memory: PeakMemory | None = None
    wall_seconds: float | None = None
    # python -m theseus_pl.deploy RUN_DIR: the encoder in ONNX (fp32, int8), its vectors checked against PyTorch's,
    # each model's STS-B dev score (dev_score) and latency beside the predecessor's.
    deployment: Deployment | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)
    search: SearchFinding | None = field(default=None, metadata=LEFT_OUT_AT_DEFAULT)  # the pick of a search alone
    folder: Path | None = field(default=None, compare=False, repr=False)  # where it was read from; not written

    # Its runs validate on their vectors' cosine to the teacher's (or held-out pairs), not on STS-B dev, the score a
    # search's floor is in: a search never stops one half-way by its floor.
    validates_on_dev_score: ClassVar[bool] = False

    @property
    def retained(self) -> float | None:
        """The successor's STS-B score as a percentage of the predecessor's; None where either is missing or not
        finite (a constant model's correlation is NaN, written as null) or the predecessor's is 0."""
        before, after = self.predecessor.sts, self.successor.sts
        if not (known(before) and known(after)) or before == 0:
            return None
        return 100 * after / before

    @property
    def trusted_speed(self) -> dict[str, float] | None:
        """The speed figures, where they were timed on a machine no other process kept busy (None otherwise)."""
        return trusted(self.speed)

    def summary(self) -> dict[str, float]:
        summary = {
            "final/predecessor_sts": self.predecessor.sts,
            "final/successor_sts": self.successor.sts,
            "final/retained": self.retained,
            "final/mse": self.successor.mse,
            "final/cosine": self.successor.cosine,
            "final/params_predecessor": self.predecessor.params,
            "final/params_successor": self.successor.params,
            "final/peak_memory_mb": self.peak_memory.cpu_mb if self.peak_memory else None,
            **{
                f"final/{name}": value for name, value in (self.trusted_speed or {}).items() if name.endswith("speedup")
            },
        }
        return {key: float(value) for key, value in summary.items() if value is not None}

    def successor_in_words(self) -> str:
        return f"sentence embeddings, {self.successor.layers}-layer successor"

    def headline(self) -> str:
        """The run in one line; a score the file holds as null (a constant model's NaN correlation, written so) as
        n/a: formatting the None it reads back as raised TypeError, ending ``report --dry-run``, which lists each run
        by it, and the run's own last log line."""
        successor = self.successor
        cosine = f", cosine to the predecessor's vectors {successor.cosine:.3f}" if known(successor.cosine) else ""
        kept = f", {self.retained:.1f}% kept" if known(self.retained) else ""
        return (
            f"{self.method}: STS-B dev {shown(self.predecessor.sts, '.2f')} (predecessor) -> "
            f"{shown(successor.sts, '.2f')} (successor"
            f"{kept}){cosine}, {self.predecessor.layers} -> {successor.layers} layers"
        )

    def searched_run(self) -> SearchedRun:
        """What a search weighs this run by besides its deployment (:mod:`~theseus_pl.app.results.search_finding`):
        its successors keep whole feed-forward layers (no width)."""
        return SearchedRun(self.predecessor.sts, self.successor.layers, None, self.successor.dir)

    def objective(self) -> float | None:
        """The successor's STS-B dev Spearman: higher is better."""
        return self.successor.sts

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EmbeddingModelResults:
        read = Keys(data, "")
        return cls(
            **envelope_fields(read),
            **{side: EmbeddingSide(**read.nested(side).pick(EmbeddingSide)) for side in SIDES},
            kept_layers=read.optional("kept_layers"),
            base_model=read.optional("base_model"),
            data=EmbeddingData(**read.nested("data").pick(EmbeddingData)),
            best_step=read.optional("best_step"),
            speed=read.optional("speed"),
            deployment=deployment_from(block) if (block := read.nested_if_given("deployment")) else None,
            search=read_search_finding(read.nested_if_given("search")),
        )
