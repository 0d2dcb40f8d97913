"""The ``deployment`` block in a model card's words: the table of scores, latencies and sizes, and the sentences that
go with it. Every kind that deploys to ONNX (classifiers, sentence-embedding models) shows its block this way."""

from __future__ import annotations

from theseus_pl.app.ship.card_text import number
from theseus_pl.deployment.record import Deployment
from theseus_pl.deployment.targets import OWN_LENGTHS, OWN_LENGTHS_IN_WORDS

DEPLOYED_MODELS = {  # the deployment block's names, as the card shows them (with the file, from the block)
    "pytorch_predecessor": "PyTorch predecessor",
    "pytorch_successor": "PyTorch successor",
    "pytorch_bf16": "PyTorch successor in bf16 (`model.to(torch.bfloat16)`)",
    "onnx_fp32": "ONNX fp32",
    "onnx_int8": "ONNX int8",
    "openvino_fp32": "OpenVINO fp32",
    "openvino_bf16": "OpenVINO bf16",
    "openvino_int8": "OpenVINO int8",
}


def deployed_model(deployment: Deployment, name: str) -> str:
    """A deployed model's title with the file it is, as the block records it (each kind names its files where its
    users' loaders look): "ONNX int8 (`onnx/model_int8.onnx`)"."""
    files = {"onnx_fp32": deployment.onnx, "onnx_int8": deployment.onnx_int8, "openvino_fp32": deployment.openvino,
             "openvino_bf16": deployment.openvino, "openvino_int8": deployment.openvino_int8}  # fmt: skip
    file = files.get(name)
    if not file:
        return DEPLOYED_MODELS[name]
    return f"{DEPLOYED_MODELS[name]} (`{file}`{' compiled in bf16' if name == 'openvino_bf16' else ''})"


def latency_table(deployment: Deployment, predecessor_score: float | None, score_title: str) -> str:
    """One row per deployed model: its score (the predecessor's from the run's record), its p50 latency at each
    batch size, its size."""
    latency = deployment.latency_ms
    scores = {"pytorch_predecessor": predecessor_score, **(deployment.dev_score or {})}
    header = " | ".join(f"p50 ms, {row_in_words(key)}" for key in latency)
    rows = "\n".join(
        f"| {deployed_model(deployment, name)} | {number(scores.get(name), 2)} | "
        + " | ".join(number(latency[key].get(name), 1) for key in latency)
        + f" | {number(deployment.size_mb.get(name), 1)} |"
        for name in DEPLOYED_MODELS
        if name in deployment.size_mb
    )
    return f"""| model | {score_title} | {header} | size (MB) |
|---|---|{"---|" * len(latency)}---|
{rows}"""


def row_in_words(key: str) -> str:
    """A latency row's name as a card's column says it: ``batch_32`` "batch 32", ``batch_32_own_lengths``
    "batch 32 (own lengths)"."""
    size = key.removeprefix("batch_").removesuffix(OWN_LENGTHS)
    return f"batch {size}" + (" (own lengths)" if key.endswith(OWN_LENGTHS) else "")


def padded_to(deployment: Deployment) -> str:
    """What the timed rows were padded to, in words (and what the own-length columns are, where there are any)."""
    length = deployment.settings.sequence_length
    padded = f"{length} tokens" if length else "their longest row"
    if not any(key.endswith(OWN_LENGTHS) for key in deployment.latency_ms):
        return padded
    return f"{padded}; in the (own lengths) columns the dev rows at their own lengths ({OWN_LENGTHS_IN_WORDS})"


def target_sentence(deployment: Deployment) -> str:
    if not deployment.target:
        return ""
    return f" The model to ship here: {deployed_model(deployment, deployment.target)}, {deployment.target_reason}."


def int8_sentence(deployment: Deployment) -> str:
    if not deployment.onnx_int8:
        return ""
    return f" `{deployment.onnx_int8}` is its int8 version (ONNX Runtime, {deployment.quantization})."


def busy_sentences(deployment: Deployment) -> str:
    """A sentence for each batch size timed while the machine was busy: its latencies are not the models'."""
    return "".join(
        f" {row_in_words(row).capitalize()} was timed while other processes kept {cores:.1f} cores busy: its "
        "latencies are not the models' alone."
        for row, cores in deployment.busy_cores.items()
    )


def openvino_sentence(deployment: Deployment) -> str:
    if not deployment.openvino:
        return ""
    int8 = f"; `{deployment.openvino_int8}` is its {deployment.calibration}" if deployment.openvino_int8 else ""
    return f" `{deployment.openvino}` is the same graph in OpenVINO{int8}."


def runtime_versions(deployment: Deployment) -> str:
    """The runtimes' versions the latencies were taken with: "1.32.0, OpenVINO 2026.4.1"."""
    openvino = f", OpenVINO {deployment.versions['openvino']}" if "openvino" in deployment.versions else ""
    return deployment.versions["onnxruntime"] + openvino
