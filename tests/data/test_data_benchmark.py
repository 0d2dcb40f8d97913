"""The data benchmark runs on the real GLUE files (no timing asserts), so it cannot rot."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_data_benchmark_reports_cache_and_padding_figures(real_glue_dir, tmp_path):
    spec = importlib.util.spec_from_file_location(
        "data_prep", Path(__file__).parents[2] / "benchmarks" / "data_prep.py"
    )
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    report = benchmark.main(
        ["--glue-dir", str(real_glue_dir), "--time-task", "RTE", "--output", str(tmp_path / "d.json")]
    )
    assert report["preparation"]["rows"] == 2490
    padding = report["padding"]
    assert padding["rows"] == 2490
    assert 0 <= padding["dynamic_grouped_padding_fraction"] <= padding["dynamic_padding_fraction"]
    assert padding["dynamic_padding_fraction"] <= padding["fixed_padding_fraction"]
    assert (tmp_path / "d.json").is_file()
