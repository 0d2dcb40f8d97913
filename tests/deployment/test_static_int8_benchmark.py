"""The static-int8 benchmark runs on a deployed tiny run (no timing asserts), so the table it fed cannot rot."""

import importlib.util
from pathlib import Path

import pytest
from app_runs import compose_config, tiny_run_overrides
from omegaconf import OmegaConf

from theseus_pl.app.run.pipeline import run

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "static_int8.py"

pytestmark = pytest.mark.slow


def test_static_int8_is_scored_and_timed_beside_the_deployed_models_and_leaves_nothing_in_the_run(
    tiny_base, glue_dir, tmp_path
):
    deploy = ["deploy.quantize=int8", "deploy.openvino=true", "deploy.batch_sizes=[1]", "deploy.repeats=1",
              "deploy.calibration_rows=4"]  # fmt: skip
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), *deploy)
    run(cfg)
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as the app's Hydra writes it
    before = sorted(run_dir.rglob("*"))
    spec = importlib.util.spec_from_file_location("static_int8", SCRIPT)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)

    report = benchmark.main([str(run_dir), "--method", "minmax", "--calibration-rows", "4", "--repeats", "1",
                             "--output", str(tmp_path / "static.json")])  # fmt: skip

    models = ["onnx_fp32", "onnx_int8_dynamic", "openvino_fp32", "openvino_int8", "onnx_int8_static_minmax"]
    assert list(report["dev_score"]) == models and all(0 <= score <= 100 for score in report["dev_score"].values())
    assert list(report["latency_ms"]) == ["batch_1_own_lengths", "batch_32_own_lengths"]
    assert all(list(row) == models and min(row.values()) > 0 for row in report["latency_ms"].values())
    assert (tmp_path / "static.json").is_file()
    assert sorted(run_dir.rglob("*")) == before  # the static model was quantised outside the run
