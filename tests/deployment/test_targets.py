"""deploy.target=auto ships the fastest model whose dev score stays within deploy.max_score_drop of the fp32
successor's; a named target is shipped as asked."""

from theseus_pl.deployment.targets import pick_target

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
        "the fastest with its dev score within 0.5 points of the fp32 successor's 75.50: 0.54x its time"
    )


def test_a_faster_target_that_loses_too_much_is_passed_over():
    assert pick_target("auto", LATENCY, scores(int8=74.9), max_score_drop=0.5).target == "pytorch_bf16"
    assert pick_target("auto", LATENCY, scores(int8=74.9, bf16=70.0), 0.5).target == "onnx_fp32"
    assert pick_target("auto", LATENCY, scores(int8=74.9), max_score_drop=1.0).target == "onnx_int8"


def test_without_dev_data_only_models_checked_against_pytorch_are_picked_and_a_named_target_wins():
    assert pick_target("auto", LATENCY, None, 0.5).target == "onnx_fp32"
    assert pick_target("pytorch_bf16", LATENCY, scores(int8=75.5), 0.5).target == "pytorch_bf16"
    assert pick_target("pytorch_bf16", LATENCY, scores(int8=75.5), 0.5).reason == "deploy.target=pytorch_bf16 as set"
