"""What a run leaves behind for people: ``results.json`` and the exported successor's model card."""

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
    """The headline numbers as flat ``final/*`` metrics for loggers; None where a number is missing."""
    return {
        "final/predecessor_score": results["predecessor"]["score"],
        "final/successor_score": results["successor"]["score"],
        "final/retained": results["retained"],
        "final/speedup": results["speedup"],
        "final/params_predecessor": float(results["params"]["predecessor"]),
        "final/params_successor": float(results["params"]["successor"]),
    }


def write_model_card(directory: Path, results: dict[str, Any]) -> Path:
    predecessor, successor = results["predecessor"], results["successor"]
    rows = "\n".join(
        f"| {name} | {predecessor['metrics'].get(name, float('nan')):.4f} | {value:.4f} |"
        for name, value in successor["metrics"].items()
    )
    card = f"""---
library_name: transformers
pipeline_tag: text-classification
tags: [bert-of-theseus, model-compression, theseus_pl]
---

# {results["task"]} successor, {results["layers"]["successor"]} layers ({results["method"]})

Compressed from a {results["layers"]["predecessor"]}-layer predecessor (`{predecessor["dir"]}`) with theseus_pl,
method `{results["method"]}`{f" (`{results['schedule']}`)" if results["schedule"] else ""}, {results["steps"]} steps.
`theseus_*` methods are progressive module replacing (BERT-of-Theseus, Xu et al., EMNLP 2020).

| | predecessor | successor |
|---|---|---|
| dev score (x100) | {predecessor["score"]:.2f} | {successor["score"]:.2f} |
| parameters | {results["params"]["predecessor"]:,} | {results["params"]["successor"]:,} |

{_retained_and_speed(results)} Dev set: {results["data"]["eval_size"]} examples; training set:
{results["data"]["train_size"]}.

| metric | predecessor | successor |
|---|---|---|
{rows}

```python
from transformers import AutoModelForSequenceClassification, AutoTokenizer

model = AutoModelForSequenceClassification.from_pretrained("<this folder>")
tokenizer = AutoTokenizer.from_pretrained("<this folder>")
```
"""
    path = directory / "README.md"
    path.write_text(card)
    return path


def _retained_and_speed(results: dict[str, Any]) -> str:
    kept = (
        f"The successor keeps {100 * results['retained']:.1f}% of the predecessor's score"
        if results["retained"] is not None
        else f"The share of the predecessor's score kept is not given ({results['retained_note']})"
    )
    speed = (
        f"runs {results['speedup']:.2f}x faster at inference on the machine that trained it"
        if results["speedup"] is not None
        else "its speed-up was not measured"
    )
    return f"{kept}; it {speed}."
