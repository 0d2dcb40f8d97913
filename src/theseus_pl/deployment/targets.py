"""Which deployed model to ship: ``deploy.target=auto`` picks the fastest whose dev score stays close to the fp32
successor's; any other ``deploy.target`` names the model itself. Plain functions of the measured block: no torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from theseus_pl.deployment.record import DeploySettings

ENCODERS = "ONNX and int8 deployment are built for encoder runs"  # what a refusal of another kind's run says
AUTO = "auto"
REFERENCE = "pytorch_successor"  # the fp32 successor every target is scored and timed against
TARGETS = (REFERENCE, "pytorch_bf16", "onnx_fp32", "onnx_int8", "openvino_fp32", "openvino_bf16", "openvino_int8")
# The exports whose logits must match PyTorch's within the deployment's tolerance; without dev data only these (and
# the successor itself) may be picked.
CHECKED_EXPORTS = ("onnx_fp32", "openvino_fp32")
CHECKED_WITHOUT_DEV_DATA = (REFERENCE, *CHECKED_EXPORTS)
# Dev scores are shares of dev rows x100 computed in float32 (774 of 1,000 rows: 77.4000015...), so a score exactly
# a floor's points under another lands a hair under the floor's float64 arithmetic. Within this many points a score
# reaches its floor: far under the 0.1 point one dev row of 1,000 is worth, far over float32's rounding.
SCORE_TOLERANCE = 1e-4


def points_in_words(drop: float) -> str:
    """A number of dev points in words: ``1 point``, ``0.5 points``."""
    return f"{drop:g} point{'' if drop == 1 else 's'}"


# What auto picks among without dev scores (pick_target's rule, and a plan's words for it), and why.
UNSCORED = "of the models checked against PyTorch's logits"
UNSCORED_WHY = "no dev data to score the others by"


def auto_in_words(max_score_drop: float, scored: bool = True) -> str:
    """What ``deploy.target=auto`` ships, in the words a plan gives it: as :func:`pick_target` picks, by dev score
    where there are dev rows to score on (``scored``), else among the models checked against PyTorch's logits
    (``max_score_drop`` unread)."""
    if not scored:
        return f"the fastest {UNSCORED}; {UNSCORED_WHY}"
    return f"the fastest within {points_in_words(max_score_drop)} of the fp32 successor"


def reaches(score: float, floor: float) -> bool:
    """Whether ``score`` is at least ``floor`` (dev points), up to float32's rounding of both (SCORE_TOLERANCE)."""
    return score >= floor - SCORE_TOLERANCE


@dataclass(frozen=True)
class TargetChoice:
    target: str
    reason: str


# Latency rows of dev rows at their own lengths (deploy.own_lengths), beside the padded ones: batch_<n>_own_lengths.
OWN_LENGTHS = "_own_lengths"
SINGLE_ROWS = 16  # dev rows timed one at a time (each a call) for the batch-1 own-lengths row
OWN_LENGTH_BATCHES = 8  # length-sorted batches of each larger size an own-lengths row is timed on
OWN_LENGTHS_IN_WORDS = (
    f"batch 1: {SINGLE_ROWS} rows one at a time, unpadded; larger: {OWN_LENGTH_BATCHES} batches of length-sorted "
    "rows, each padded to its longest; the time a batch"
)


def timing_in_words(settings: DeploySettings, threads: int, predecessor: Path | None, own_lengths: bool) -> str:
    """A dry run's words for the timing, every kind's: the batch sizes at their length, the calls, the ``threads``,
    beside the ``predecessor`` where it is timed too, and again at the dev rows' own lengths where ``own_lengths``."""
    length = f"{settings.sequence_length} tokens a row" if settings.sequence_length else "each batch's longest row"
    beside = f", beside the predecessor {predecessor}" if predecessor else ""
    own = f"; again at the dev rows' own lengths ({OWN_LENGTHS_IN_WORDS})" if own_lengths else ""
    return (
        f"time it at batch sizes {', '.join(map(str, settings.batch_sizes))} ({length}), {settings.repeats} calls "
        f"each, on {threads} thread{'s' if threads != 1 else ''}{beside}{own}"
    )


def chosen_on(latency_ms: Mapping[str, Mapping[str, float]]) -> dict[str, Mapping[str, float]]:
    """The latency rows a choice is made on: those at the dev rows' own lengths where there are any (what a served
    model meets), else all."""
    own = {key: row for key, row in latency_ms.items() if key.endswith(OWN_LENGTHS)}
    return own or dict(latency_ms)


def relative_time(latency_ms: Mapping[str, Mapping[str, float]], name: str) -> float:
    """``name``'s time as a multiple of the fp32 successor's, the mean over the rows :func:`chosen_on` (below 1:
    faster)."""
    return statistics.fmean(row[name] / row[REFERENCE] for row in chosen_on(latency_ms).values())


def pick_target(
    requested: str,
    latency_ms: Mapping[str, Mapping[str, float]],
    dev_score: Mapping[str, float | None] | None,
    max_score_drop: float,
) -> TargetChoice:
    """The target to ship, and why, from the timings (ms per batch size, then per model) and the dev scores (x100)."""
    if requested != AUTO:
        return TargetChoice(requested, f"deploy.target={requested} as set")
    timed = [name for name in TARGETS if all(name in row for row in latency_ms.values())]
    if dev_score is None:
        kept = [name for name in timed if name in CHECKED_WITHOUT_DEV_DATA]
        fits = f"{UNSCORED} ({UNSCORED_WHY})"
    else:
        floor = _score(dev_score, REFERENCE) - max_score_drop
        kept = [name for name in timed if reaches(_score(dev_score, name), floor)]
        fits = (
            f"with its dev score within {points_in_words(max_score_drop)} of the fp32 successor's "
            f"{_score(dev_score, REFERENCE):.2f}"
        )
    best = min(kept, key=lambda name: relative_time(latency_ms, name))
    lengths = " at the dev rows' own lengths" if any(key.endswith(OWN_LENGTHS) for key in latency_ms) else ""
    # On a VNNI CPU OpenVINO's int8 can be the fastest of all: a pick among the others must not read as the fastest
    untried = "" if any(name.startswith("openvino") for name in timed) else (
        "; OpenVINO's models were not deployed to compete (deploy.openvino=false, --no-openvino, or its extra not "
        "installed: pip install 'theseus_pl[openvino]')"
    )  # fmt: skip
    return TargetChoice(best, f"the fastest{lengths} {fits}: {relative_time(latency_ms, best):.2f}x its time{untried}")


def _score(scores: Mapping[str, float | None], name: str) -> float:
    value = scores.get(name)
    return -math.inf if value is None or math.isnan(value) else value
