"""The core benchmark runs end to end in a tiny setting, so it cannot rot (no timing asserts)."""

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "core_step.py"


def test_core_benchmark_reports_every_ratio(tmp_path):
    spec = importlib.util.spec_from_file_location("core_step", SCRIPT)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    output = tmp_path / "core.json"
    report = benchmark.main(["--batch-size", "2", "--seq-len", "8", "--steps", "1", "--output", str(output)])
    assert json.loads(output.read_text()) == json.loads(json.dumps(report))
    configs = {"finetune", "theseus_p0.5", "theseus_p1.0"}
    for key in ("step_time_ratio", "peak_rss_ratio", "model_rss_ratio"):
        assert set(report[key]) == configs
        assert report[key]["finetune"] == 1.0
        assert all(value > 0 for value in report[key].values())
    assert set(report["inference"]) == {"batch_1", "batch_2"}
    assert all(row["speedup"] > 0 for row in report["inference"].values())
