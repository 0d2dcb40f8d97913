"""The record and card each kind of run writes, held against a golden copy: a tiny run of each kind (task model,
decoder LM, sentence-embedding model) writes a ``results.json`` and a model card whose every key, string, count and
sentence match the files in ``test_golden_records/``. What moving a kind's code may not change is what it writes.

What a machine decides is masked before the comparison: every float (scores, losses and speeds differ between CPUs and
precisions), the run's own folder, cache hashes, and the blocks that describe the machine (hardware, memory, wall time,
the greedy sample, the best step). Timing is off (``benchmark.repeats=0``), so a busy machine words no card otherwise.
After an intended change of a record or card, ``pytest tests/app/test_golden_records.py --force-regen`` rewrites the
copies (pytest-regressions); the diff then shows, in review, exactly what changed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from app_runs import compose_config, tiny_run_overrides
from decoder_models import tiny_decoder, tiny_documents, tiny_lm_tokenizer
from embedding_models import make_sentence_glue_dir, save_tiny_embedding_model

from theseus_pl.app.run.pipeline import run

# Values a machine decides, whatever their type: masked whole.
MACHINE_KEYS = {"hardware", "peak_memory", "wall_seconds", "sample", "best_step", "cpu", "precision"}
STEPS = ["schedule_steps=3", "trainer.max_steps=6", "trainer.val_check_interval=2", "logger=csv",
         "benchmark.repeats=0", "optimizer.lr=1e-3"]  # fmt: skip


def masked(value: Any, root: Path) -> Any:
    """``value`` (a record, read from JSON) with what the machine decides replaced by a marker of its kind."""
    if isinstance(value, dict):
        return {key: "<machine>" if key in MACHINE_KEYS else masked(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [masked(item, root) for item in value]
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, str):
        return re.sub(r"\b[0-9a-f]{16}\b", "<hash>", value.replace(str(root), "<root>"))
    return value


def masked_card(text: str, root: Path) -> str:
    """The card's text with the run's folder, cache hashes and every decimal number masked."""
    text = re.sub(r"\b[0-9a-f]{16}\b", "<hash>", text.replace(str(root), "<root>"))
    return re.sub(r"-?\d+\.\d+(e-?\d+)?", "<n>", text)


def _task_model(root: Path, tiny_base: Path, glue_dir: Path) -> Path:
    run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, root), *STEPS))
    return root / "run"


def _language_model(root: Path) -> Path:
    model, texts = root / "tiny_llama", root / "texts"
    tiny_decoder("llama").save_pretrained(model)
    tiny_lm_tokenizer().save_pretrained(model)
    texts.mkdir()
    for i, text in enumerate(tiny_documents(count=20, words=40)):
        (texts / f"{i:02d}.txt").write_text(text)
    run(compose_config(
        "+experiment=smollm2_quick", "model.gguf=null", f"model.base={model}", f"data.files=[{texts}]",
        "data.window=8", "data.batch_size=4", "data.max_eval_windows=8", "theseus.successor_layers=2", *STEPS,
        f"paths.cache_dir={root / 'cache'}", f"paths.output_dir={root / 'run'}",
    ))  # fmt: skip
    return root / "run"


def _embedding_model(root: Path) -> Path:
    model = save_tiny_embedding_model(root / "model", normalize=True)
    glue = make_sentence_glue_dir(root / "glue")
    run(compose_config(
        "+experiment=minilm_embedding_quick", f"model.base={model}", "model.hub_id=null", f"data.glue_dir={glue}",
        "data.max_sentences=null", "data.held_out=8", "data.batch_size=8", "theseus.successor_layers=2",
        "theseus.init=every_other", *STEPS, f"paths.cache_dir={root / 'cache'}", f"paths.output_dir={root / 'run'}",
    ))  # fmt: skip
    return root / "run"


@pytest.mark.parametrize("kind", ["task_model", "language_model", "embedding_model"])
def test_each_kind_writes_the_record_and_card_it_wrote_before(
    kind, tmp_path, tiny_base, glue_dir, data_regression, file_regression
):
    if kind == "task_model":
        folder = _task_model(tmp_path, tiny_base, glue_dir)
    else:
        folder = (_language_model if kind == "language_model" else _embedding_model)(tmp_path)
    record = json.loads((folder / "results.json").read_text())
    assert record["kind"] == kind and record["failed_steps"] == {}
    data_regression.check(masked(record, tmp_path), basename=f"{kind}_results")
    card = (folder / "successor" / "README.md").read_text()
    file_regression.check(masked_card(card, tmp_path), basename=f"{kind}_card", extension=".md")
