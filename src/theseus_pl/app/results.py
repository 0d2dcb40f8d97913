"""``results.json``: written so that it is always whole and valid, and the numbers derived from it."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def write_results(path: Path, results: dict[str, Any]) -> Path:
    """Valid JSON (a non-finite number, e.g. a correlation of constant predictions, becomes null), written atomically.

    Atomic because the file is written as soon as the scores are known and rewritten after each later step: a
    job killed in between leaves the previous complete file, never half of one.
    """
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_text(json.dumps(_finite(results), indent=2, allow_nan=False) + "\n")
    os.replace(staged, path)
    return path


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def retained(predecessor_score: float, successor_score: float) -> tuple[float | None, str | None]:
    """Successor score over predecessor score, or None with the reason where that ratio means nothing."""
    if not (math.isfinite(predecessor_score) and math.isfinite(successor_score)):
        return None, "a score is not a number (e.g. a correlation of constant predictions)"
    if predecessor_score <= 0:
        return None, f"the predecessor's score is {predecessor_score:g}: a share of it means nothing"
    return successor_score / predecessor_score, None


def flat_summary(results: dict[str, Any]) -> dict[str, float | None]:
    """The headline numbers as flat ``final/*`` metrics for loggers; None where a number is missing.

    A deployed run adds each deployed model's dev score and speed-up over the predecessor at each batch size
    (``final/deploy/onnx_int8_score``, ``final/deploy/onnx_int8_speedup_batch_1``, ...).
    """
    deployment = results.get("deployment") or {}
    deployed = {f"final/deploy/{name}_score": score for name, score in (deployment.get("dev_score") or {}).items()}
    for batch, speedups in (deployment.get("speedup_over_predecessor") or {}).items():
        deployed.update({f"final/deploy/{name}_speedup_{batch}": value for name, value in (speedups or {}).items()})
    return {
        "final/predecessor_score": results["predecessor"]["score"],
        "final/successor_score": results["successor"]["score"],
        "final/retained": results["retained"],
        "final/speedup": results["speedup"],
        "final/params_predecessor": float(results["params"]["predecessor"]),
        "final/params_successor": float(results["params"]["successor"]),
        **deployed,
    }
