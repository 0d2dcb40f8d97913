"""deploy.target=auto ships the fastest model whose dev score stays within deploy.max_score_drop of the fp32
successor's; a named target is shipped as asked."""

import numpy as np
import pytest

from theseus_pl.deployment.targets import pick_target

pytestmark = pytest.mark.quick

LATENCY = {  # ms per batch size, then per model: int8 fastest, then bf16, then ONNX fp32
    "batch_1": {"pytorch_predecessor": 24.0, "pytorch_successor": 12.0, "pytorch_bf16": 9.0, "onnx_fp32": 11.0,
                "onnx_int8": 6.0},
    "batch_32": {"pytorch_predecessor": 580.0, "pytorch_successor": 280.0, "pytorch_bf16": 200.0, "onnx_fp32": 270.0,
                 "onnx_int8": 160.0},
}  # fmt: skip


def scores(int8: float, bf16: float = 75.4) -> dict[str, float]:
    return {"pytorch_successor": 75.5, "pytorch_bf16": bf16, "onnx_fp32": 75.5, "onnx_int8": int8}


def test_auto_picks_the_fastest_target_within_the_allowed_score_drop():
    choice = pick_target("auto", LATENCY, scores(int8=75.2), max_score_drop=0.5)
    assert choice.target == "onnx_int8"
    assert choice.reason == (
        "the fastest with its dev score within 0.5 points of the fp32 successor's 75.50: 0.54x its time; OpenVINO's "
        "models were not deployed to compete (deploy.openvino=false, --no-openvino, or its extra not installed: "
        "pip install 'theseus_pl[openvino]')"
    )


def test_a_target_exactly_the_allowed_points_under_is_kept_whatever_float32_rounding_says():
    fp32, int8 = float(np.float32(76.8)), float(np.float32(0.763)) * 100  # 768 and 763 of 1,000 dev rows
    assert int8 < fp32 - 0.5  # a hair under in floats
    dev = {"pytorch_successor": fp32, "pytorch_bf16": 70.0, "onnx_fp32": fp32, "onnx_int8": int8}
    assert pick_target("auto", LATENCY, dev, max_score_drop=0.5).target == "onnx_int8"


def test_a_faster_target_that_loses_too_much_is_passed_over():
    assert pick_target("auto", LATENCY, scores(int8=74.9), max_score_drop=0.5).target == "pytorch_bf16"
    assert pick_target("auto", LATENCY, scores(int8=74.9, bf16=70.0), 0.5).target == "onnx_fp32"
    assert pick_target("auto", LATENCY, scores(int8=74.9), max_score_drop=1.0).target == "onnx_int8"


def test_without_dev_data_only_models_checked_against_pytorch_are_picked_and_a_named_target_wins():
    assert pick_target("auto", LATENCY, None, 0.5).target == "onnx_fp32"
    assert pick_target("auto", LATENCY, None, 0.5).reason == (  # it read "the fastest with its no dev data: ..."
        "the fastest of the models checked against PyTorch's logits (no dev data to score the others by): 0.94x its "
        "time; OpenVINO's models were not deployed to compete (deploy.openvino=false, --no-openvino, or its extra "
        "not installed: pip install 'theseus_pl[openvino]')"
    )
    assert pick_target("pytorch_bf16", LATENCY, scores(int8=75.5), 0.5).target == "pytorch_bf16"
    assert pick_target("pytorch_bf16", LATENCY, scores(int8=75.5), 0.5).reason == "deploy.target=pytorch_bf16 as set"


def test_openvino_targets_compete_on_the_same_terms():
    latency = {  # OpenVINO int8 the slowest of the exports, as the demo's successor measured on the AVX2-only EPYC
        "batch_1": {**LATENCY["batch_1"], "onnx_int8": 12.9, "openvino_fp32": 14.3, "openvino_int8": 18.2},
        "batch_32": {**LATENCY["batch_32"], "onnx_int8": 314.0, "openvino_fp32": 380.0, "openvino_int8": 484.0},
    }
    both = {**scores(int8=75.3), "openvino_fp32": 75.5, "openvino_int8": 75.4}
    assert pick_target("auto", latency, both, 0.5).target == "pytorch_bf16"
    faster = {size: {**row, "openvino_int8": row["pytorch_bf16"] / 2} for size, row in latency.items()}
    assert pick_target("auto", faster, both, 0.5).target == "openvino_int8"
    assert pick_target("auto", faster, both, 0.5).reason.endswith(": 0.37x its time")  # they competed: nothing to add
    assert pick_target("auto", faster, {**both, "openvino_int8": 74.9}, 0.5).target == "pytorch_bf16"
    without_fast_pytorch = {size: {k: v for k, v in row.items() if k != "pytorch_bf16"} for size, row in faster.items()}
    assert pick_target("auto", without_fast_pytorch, None, 0.5).target == "onnx_fp32"  # OpenVINO fp32 slower here
    only_openvino = {size: {**row, "openvino_fp32": 1.0} for size, row in without_fast_pytorch.items()}
    assert pick_target("auto", only_openvino, None, 0.5).target == "openvino_fp32"  # checked against PyTorch too


def test_with_own_length_rows_auto_chooses_on_them_alone():
    """Padded to 128 tokens int8 wins; at the dev rows' own lengths (what a server meets) ONNX fp32 does: it ships."""
    own = {
        "batch_1_own_lengths": {**LATENCY["batch_1"], "onnx_int8": 5.0, "onnx_fp32": 3.0},
        "batch_32_own_lengths": {**LATENCY["batch_32"], "onnx_int8": 90.0, "onnx_fp32": 60.0},
    }
    choice = pick_target("auto", {**LATENCY, **own}, scores(int8=75.5), max_score_drop=0.5)
    assert choice.target == "onnx_fp32" and choice.reason.startswith("the fastest at the dev rows' own lengths with")
    assert pick_target("auto", LATENCY, scores(int8=75.5), max_score_drop=0.5).target == "onnx_int8"
