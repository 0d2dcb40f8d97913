"""The search's own settings (``hydra.sweeper.*`` of ``hydra/sweeper=search``), checked as they are built: one
:class:`~theseus_pl.core.settings.SettingsError` names every value of the wrong type or range."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from theseus_pl.core.settings import Rule, SettingsError, check_fields, number, positive_int

PREFIX = "hydra.sweeper."
STUDY_FILE = "study.db"  # the study's SQLite file in the sweep folder, where no storage URL is given


@dataclass(frozen=True)
class SearchSettings:
    """What to search for: the fastest successor whose dev score is within ``max_score_drop`` points of the
    predecessor's, timed at ``batch_size`` (1: one sentence a call; 32: batches), over ``trials`` trials."""

    trials: int = 8
    max_score_drop: float = 1.0
    batch_size: int = 1  # the serving pattern: the deploy timing row minimised (batch_<n>_own_lengths)
    parallel: int = 1  # trials launched at once (set the launcher's own parallelism alike: joblib's n_jobs)
    seed: int = 0  # the sampler's seed
    storage: str | None = None  # an Optuna storage URL (postgresql://...); None: sqlite in the sweep folder
    study_name: str = "search"
    params: Mapping[str, Any] = field(default_factory=dict)  # the searched keys, in Hydra's sweep grammar
    # A trial still this many points under the floor half-way through its steps stops there (callbacks.stop_below),
    # once a trial has told the predecessor's score; None: every trial runs to its end.
    prune_margin: float | None = 10.0
    # A trial whose shape an earlier trial timed this share slower than the pick (0.1: 10 %), in its fastest runtime,
    # is not trained (told pruned): it cannot be the pick. None: every trial trains.
    shape_margin: float | None = 0.1
    # The kind's reference models on the front beside the trials (a sentence-embedding search: model2vec's static
    # model of the predecessor, where model2vec is installed); never a trial, never the pick.
    references: bool = True
    # A latency target: the pick must also take at most this many ms a call at batch_size. Each shape of the space is
    # then deployed and timed untrained before any trial trains: a target no shape meets is refused there, naming the
    # fastest, and a trial of a shape over it is not trained. None: no target, no shape timed before training.
    max_latency_ms: float | None = None

    RULES: ClassVar[dict[str, Rule]] = {
        "trials": Rule(positive_int, "a whole number of trials, at least 1, e.g. 16"),
        "max_score_drop": Rule(lambda v: number(v) and v >= 0, "a number of dev points, at least 0, e.g. 1.0"),
        "batch_size": Rule(positive_int, "the batch size served: 1 (a sentence a call) or one of deploy.batch_sizes"),
        "parallel": Rule(positive_int, "a whole number of trials run at once, at least 1"),
        "seed": Rule(lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
        "storage": Rule(lambda v: v is None or (isinstance(v, str) and "://" in v),
                        "null (SQLite in the sweep folder) or an Optuna storage URL, e.g. postgresql://host/db"),
        "study_name": Rule(lambda v: isinstance(v, str) and bool(v), "a name"),
        "params": Rule(lambda v: isinstance(v, Mapping), "a mapping of keys to search ranges"),
        "prune_margin": Rule(lambda v: v is None or (number(v) and v >= 0),
                             "null (every trial runs to its end) or a number of dev points under the floor, e.g. 10.0"),
        "references": Rule(lambda v: isinstance(v, bool), "true or false"),
        "max_latency_ms": Rule(lambda v: v is None or (number(v) and v > 0),
                               "null (no target) or a number of milliseconds a call above 0, e.g. 2.5"),
        "shape_margin": Rule(lambda v: v is None or (number(v) and v >= 0),
                             "null (every trial trains) or a share of the pick's time, at least 0, e.g. 0.1"),
    }  # fmt: skip
    DIRECTIONS: ClassVar[tuple[str, str]] = ("maximize", "minimize")  # the dev score, the time a call

    def __post_init__(self) -> None:
        check_fields(vars(self), self.RULES, PREFIX)

    @classmethod
    def from_config(cls, sweeper: Mapping[str, Any]) -> SearchSettings:
        """From ``hydra.sweeper`` (its ``_target_`` aside); a key of no setting is named with the settings there are."""
        values = {str(key): value for key, value in sweeper.items() if not str(key).startswith("_")}
        unknown = sorted(set(values) - set(cls.RULES))
        if unknown:
            known = ", ".join(cls.RULES)
            raise SettingsError({key: f"{PREFIX}{key} is no setting of the search (its settings: {known})."
                                 for key in unknown})  # fmt: skip
        return cls(**values)

    def stop_below(self, predecessor_score: float | None) -> float | None:
        """The dev score under which a trial stops half-way (``callbacks.stop_below.below``); None: none stops."""
        if self.prune_margin is None or predecessor_score is None:
            return None
        return predecessor_score - self.max_score_drop - self.prune_margin

    def storage_url(self, sweep_folder: Path) -> str:
        """Where the study lives: the given URL, else the sweep folder's SQLite file."""
        return self.storage or f"sqlite:///{(sweep_folder / STUDY_FILE).resolve()}"
