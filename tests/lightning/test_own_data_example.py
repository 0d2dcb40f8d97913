"""The Python twin of the own-data command (docs/guide/own-model.md, the README's "In Python") runs as written."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import OWN_LABELS

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "guide" / "own-model.md"


def own_data_example() -> str:
    (code,) = re.findall(r"```python\n(.+?)\n```", PAGE.read_text(), re.S)
    return code


def test_the_example_is_short_and_takes_at_most_four_names_from_theseus_pl():
    code = own_data_example()
    assert len(code.splitlines()) <= 20
    (names,) = re.findall(r"^from theseus_pl import (.+)$", code, re.M)
    assert len(names.split(", ")) <= 4
    assert "theseus_pl." not in code  # nothing from deeper in the package


def test_the_example_compresses_your_classifier_on_your_files_and_scores_by_accuracy(own_data, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(own_data_example())
    result = subprocess.run(
        [sys.executable, str(script)], cwd=own_data, capture_output=True, text=True, timeout=600,
        env={**os.environ, "THESEUS_PL_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (validated,) = re.findall(r"^\[\{.*'val/accuracy'.*\}\]$", result.stdout, re.M)
    assert "'val/score'" in validated
    config = json.loads((own_data / "successor" / "config.json").read_text())
    assert config["num_hidden_layers"] == 3
    assert list(config["id2label"].values()) == OWN_LABELS
    for notice in ("LeafSpec", "litlogger", "Tip:"):
        assert notice not in result.stdout + result.stderr, notice
