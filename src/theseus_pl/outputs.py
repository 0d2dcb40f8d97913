"""What a run leaves behind for people: ``results.json`` and the exported successor's model card."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(path: Path, results: dict[str, Any]) -> Path:
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def flat_summary(results: dict[str, Any]) -> dict[str, float]:
    """The headline numbers as flat ``final/*`` metrics for loggers."""
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

The successor keeps {100 * results["retained"]:.1f}% of the predecessor's score and runs {results["speedup"]:.2f}x
faster at inference on the machine that trained it. Dev set: {results["data"]["eval_size"]} examples; training set:
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
