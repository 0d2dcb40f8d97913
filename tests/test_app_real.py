"""The whole pipeline once on real data and real weights: an RTE subset, all-MiniLM-L6-v2 compressed 6 -> 3."""

import json

import pytest
from conftest import compose_config

from theseus_pl.pipeline import run

pytestmark = pytest.mark.slow


def test_real_rte_subset_with_minilm(real_glue_dir, tmp_path):
    cfg = compose_config(
        "model=minilm", "data.task=RTE", f"data.glue_dir={real_glue_dir}", "data.max_train_samples=64",
        "data.max_eval_samples=32", "data.batch_size=16", "finetune.epochs=1", "theseus.successor_layers=3",
        "schedule_steps=2", "trainer=cpu", "trainer.max_steps=4", "trainer.val_check_interval=2", "logger=csv",
        "benchmark.repeats=1", f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'run'}",
    )  # fmt: skip
    results = run(cfg)
    assert (
        json.loads((tmp_path / "run" / "results.json").read_text())["successor"]["score"]
        == results["successor"]["score"]
    )
    assert results["layers"] == {"predecessor": 6, "successor": 3}
    assert results["data"] == {"train_size": 64, "eval_size": 32}
    assert 0 <= results["successor"]["score"] <= 100 and 0 <= results["predecessor"]["score"] <= 100
    assert results["speedup"] > 0
