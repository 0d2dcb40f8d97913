"""The Python twin of the own-data command (docs/guide/own-model.md, the README's "In Python") runs as written."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
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


def test_a_head_that_does_not_fit_the_data_is_refused_as_training_starts(own_data, tmp_path):
    from lightning.pytorch import Trainer
    from transformers import AutoModelForSequenceClassification

    from theseus_pl import TextTaskDataModule, TheseusModel, TheseusModule

    classifier = str(own_data / "my-classifier")  # its head: negative, positive
    files = {"train": own_data / "train.csv", "validation": own_data / "dev.csv"}
    swapped = TextTaskDataModule.from_files(
        files, ["text"], ["positive", "negative"], tokenizer=classifier, cache_dir=tmp_path
    )
    module = TheseusModule(TheseusModel(AutoModelForSequenceClassification.from_pretrained(classifier), 2))
    trainer = Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    with pytest.raises(ValueError, match=r"does not fit the data module's task reviews: its head's classes are"):
        trainer.fit(module, datamodule=swapped)
