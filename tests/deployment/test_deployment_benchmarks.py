"""The deployment benchmarks run on a deployed tiny run (no timing asserts), so the tables they fed cannot rot."""

import importlib.util
from pathlib import Path

import pytest
from app_runs import compose_config, tiny_run_overrides
from omegaconf import OmegaConf

from theseus_pl.app.run.pipeline import run

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"

pytestmark = pytest.mark.slow


@pytest.fixture
def deployed_run(tmp_path, tiny_base, glue_dir) -> Path:
    """A finished tiny run deployed with int8 and OpenVINO, its config where the app's Hydra writes it."""
    deploy = ["deploy.quantize=int8", "deploy.openvino=true", "deploy.batch_sizes=[1]", "deploy.repeats=1",
              "deploy.calibration_rows=4"]  # fmt: skip
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), *deploy)
    run(cfg)
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    return run_dir


def benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_static_int8_is_scored_and_timed_beside_the_deployed_models_and_leaves_nothing_in_the_run(
    deployed_run, tmp_path
):
    before = sorted(deployed_run.rglob("*"))
    report = benchmark("static_int8").main([str(deployed_run), "--method", "minmax", "--calibration-rows", "4",
                                            "--repeats", "1", "--output", str(tmp_path / "static.json")])  # fmt: skip

    models = ["onnx_fp32", "onnx_int8_dynamic", "openvino_fp32", "openvino_int8", "onnx_int8_static_minmax"]
    assert list(report["dev_score"]) == models and all(0 <= score <= 100 for score in report["dev_score"].values())
    assert list(report["latency_ms"]) == ["batch_1_own_lengths", "batch_32_own_lengths"]
    assert all(list(row) == models and min(row.values()) > 0 for row in report["latency_ms"].values())
    assert (tmp_path / "static.json").is_file()
    assert sorted(deployed_run.rglob("*")) == before  # the static model was quantised outside the run


def test_the_onnx_profile_shares_the_int8_models_time_among_its_operators(deployed_run, tmp_path):
    report = benchmark("onnx_profile").main([str(deployed_run), "--batch-size", "4", "--repeats", "2",
                                             "--output", str(tmp_path / "profile.json")])  # fmt: skip

    operators = report["operators"]
    assert "MatMulIntegerToFloat" in operators or "DynamicQuantizeMatMul" in operators  # the int8 products
    assert sum(row["share"] for row in operators.values()) == pytest.approx(1.0)
    assert list(operators) == sorted(operators, key=lambda name: -operators[name]["sum"])
    assert (tmp_path / "profile.json").is_file()
