"""The predecessor's lm-evaluation-harness scores, cached: every run of a sweep scores the same predecessor on the
same tasks, and on a CPU one model's SST-2 and RTE dev sets take about two minutes (SmolLM2-135M, fp32, 2 cores).

The key holds what decides the scores: the model's files (or hub id), the task folders' files (definitions and
data), the few-shot count, the example limit, the device and lm-eval's version. lm-eval's own tasks are keyed by
name and lm-eval's version (their data is the hub's).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path

from theseus_pl.app.predecessors.classifier import model_fingerprint
from theseus_pl.data.cache_entry import content_digest, load_or_build

log = logging.getLogger(__name__)

Scores = dict[str, dict[str, float]]


def cached_harness_scores(
    model_name: str,
    tasks: Sequence[str],
    task_folders: Sequence[Path],
    settings: dict[str, object],
    cache_dir: Path,
    score: Callable[[], Scores],
) -> Scores:
    """``score()`` of the model ``model_name`` (a folder or hub id), or the scores it gave before with the same
    tasks, task files and ``settings`` (few-shot count, limit, device)."""
    key = {
        "model": model_fingerprint(model_name),
        "tasks": sorted(tasks),
        "task_files": sorted(
            f"{path.name}:{content_digest(path)}"
            for folder in task_folders
            for path in Path(folder).rglob("*")
            if path.is_file()
        ),
        "settings": settings,
        "lm_eval": version("lm_eval"),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]

    def build(staging: Path) -> None:
        (staging / "scores.json").write_text(json.dumps(score(), indent=1))

    def load(folder: Path) -> Scores:
        return json.loads((folder / "scores.json").read_text())

    scores, built = load_or_build(
        cache_dir / f"lm-eval-scores-{digest}", load, build, "the predecessor's lm-eval scores"
    )
    if not built:
        log.info("The predecessor's lm-eval scores from the cache (%s)", ", ".join(tasks))
    return scores
