"""What a search (``+search=fastest_within``, :mod:`~theseus_pl.app.search`) reads of its trials' records, and what it
writes into its pick's: a kind whose runs a search may weigh writes a record of this shape
(:class:`SearchableRecord`), so that the search reads any such kind through the registry and imports none."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple, Protocol, runtime_checkable

from theseus_pl.app.results.envelope import Keys, ResultsError
from theseus_pl.app.results.registry import registered_kinds
from theseus_pl.deployment.record import Deployment


@dataclass(frozen=True)
class FrontPoint:
    """A trial on a search's Pareto front, as the pick's card lists it."""

    trial: int
    shape: str  # its depth, width and runtime in words: "3 layers, ffn 384, onnx_int8"
    score: float | None  # its shipped model's dev score (x100)
    latency_ms: float | None  # its median time a call at the search's batch size, on the dev rows' own lengths


@dataclass(frozen=True)
class SearchFinding:
    """How a search chose this run: written into its pick's record alone, so that the card it ships with (and
    publish's, rewritten from the record) names the search, its floor and its front."""

    study: str
    trial: int  # this run's trial number
    trials: int  # the trials run to an outcome
    batch_size: int  # the serving batch size timed and minimised
    predecessor_score: float | None
    max_score_drop: float
    floor: float | None  # the predecessor's score less max_score_drop
    front: list[FrontPoint]  # fastest first


class SearchedRun(NamedTuple):
    """What a search weighs a trial by, besides its deployment's scores and times: the predecessor's dev score its
    floor is measured from, the successor's shape (its label on the front) and the folder its card is in."""

    predecessor_score: float | None
    layers: int
    intermediate_size: int | None  # None where its family has no feed-forward width
    successor_dir: str


class ReferencePoint(NamedTuple):
    """A model a search puts on its front beside its trials to weigh them against, never a trial and never the pick
    (a sentence-embedding search's model2vec static model of the same predecessor)."""

    label: str
    score: float  # its dev score, as the trials' shipped models are scored
    latency_ms: float  # its median time a call at the search's batch size, on the trials' dev rows


@runtime_checkable
class SearchableRecord(Protocol):
    """A record a search can weigh: deployed (each runtime's dev score and times), told as a :class:`SearchedRun`,
    with a field the search's finding is written into (its pick's alone)."""

    deployment: Deployment | None
    search: SearchFinding | None
    # Whether its runs validate (val/score) on the scale of the dev score the search's floor is in, so that a trial
    # still far under the floor half-way may be stopped there (hydra.sweeper.prune_margin).
    validates_on_dev_score: ClassVar[bool]

    def searched_run(self) -> SearchedRun: ...


def searchable_kinds() -> dict[str, str]:
    """The kinds whose records a search can weigh (a :class:`SearchableRecord`: a Protocol with fields, which
    ``issubclass`` cannot test, hence the method looked up), each in words, by name, in the registry's order."""
    return {name: kind.described for name, kind in registered_kinds().items()
            if callable(getattr(kind.record, "searched_run", None))}  # fmt: skip


def validates_on_dev_score(kind: str) -> bool:
    """Whether the runs of ``kind`` validate on their dev score's scale (:class:`SearchableRecord`); False for a
    kind a search cannot weigh."""
    return bool(getattr(registered_kinds()[kind].record, "validates_on_dev_score", False))


def reference_points(kind: str, trial_folder: Path, batch_size: int, cache_dir: Path) -> list[ReferencePoint]:
    """The points the kind puts on its searches' fronts (:attr:`~theseus_pl.app.results.registry.Kind.
    search_references`), from a measured trial's run folder; none for a kind that puts none."""
    references = registered_kinds()[kind].search_references
    return [] if references is None else references(trial_folder, batch_size, cache_dir)


def read_search_finding(read: Keys | None) -> SearchFinding | None:
    """The ``search`` block of a record's file, or None where the run was no search's pick."""
    if read is None:
        return None
    front = read.required("front")
    if not isinstance(front, list):
        raise ResultsError(f"{read.where}front is not a list")
    points = [FrontPoint(**Keys(point, f"{read.where}front[{i}].").pick(FrontPoint)) for i, point in enumerate(front)]
    return SearchFinding(**{**read.pick(SearchFinding), "front": points})
