"""ONNX Runtime's static (calibrated, QDQ) int8 beside the models a deployment ships, on a deployed classifier run.

    python benchmarks/static_int8.py RUN_DIR [--glue-dir PATH] [--calibration-rows 300] [--method minmax [entropy]]
        [--threads 2] [--repeats 20] [--output static_int8.json]

``RUN_DIR`` is a finished run deployed with int8 (``python -m theseus_pl.deploy RUN_DIR``, ``--openvino`` for the
OpenVINO rows). The successor is exported again unfused, pre-processed and quantised by ``quantize_static``: QDQ
format, MatMul weights int8 per channel (7 bits on a CPU without VNNI, as the dynamic model), uint8 activations,
calibrated on the training rows OpenVINO's NNCF calibrates on (``calibration_rows``: each its own batch at its own
length). Each model is scored on the run's dev set and timed at the dev rows' own lengths (batch 1 unpadded; sorted
batches of 32), the models taking turns, as a deployment times them. Whether static int8 earns a deploy target is
decided on this table, per CPU kind (docs/results/deployment.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from theseus_pl.app.kinds.task_model.shipping import run_dev_data
from theseus_pl.core.precision import this_cpu
from theseus_pl.deployment.onnx_deployment import own_length_batches, timed_latency
from theseus_pl.deployment.onnx_export import export_onnx, inference_session, int8_reduce_range, session_logits
from theseus_pl.deployment.openvino_export import compile_openvino, openvino_logits
from theseus_pl.deployment.stage import calibration_rows, load_sequence_classifier, timing_rows
from theseus_pl.deployment.targets import OWN_LENGTHS
from theseus_pl.lightning.metrics import TaskMetrics

Logits = Callable[[Mapping[str, torch.Tensor]], torch.Tensor]


class _Rows:
    """ONNX Runtime's calibration reader over tokenised batches (its ``get_next`` protocol)."""

    def __init__(self, batches: list[dict[str, torch.Tensor]], names: list[str]) -> None:
        self._feeds: Iterator[dict[str, np.ndarray]] = iter(
            [{name: batch[name].numpy() for name in names} for batch in batches]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def quantize_static_int8(
    fp32_path: Path, int8_path: Path, calibration: list[dict[str, torch.Tensor]], reduce_range: bool, method: str
) -> Path:
    """ONNX Runtime's static QDQ int8 of ``fp32_path`` (MatMul, as the dynamic model's products), calibrated by
    ``method`` on ``calibration``."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quant_pre_process, quantize_static

    with tempfile.TemporaryDirectory() as staging:
        prepared = Path(staging) / "prepared.onnx"
        quant_pre_process(str(fp32_path), str(prepared), skip_symbolic_shape=True)
        names = [node.name for node in inference_session(prepared, 1).get_inputs()]
        quantize_static(
            prepared,
            int8_path,
            _Rows(calibration, names),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            reduce_range=reduce_range,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method={"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy}[method],
        )
    return int8_path


def dev_score(logits: Logits, datamodule: Any) -> float:
    metric = TaskMetrics.for_task(datamodule.task)
    for batch in datamodule.val_dataloader():
        metric.update(logits(batch), batch["labels"], eval_index=0)
    return float(metric.compute()["score"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--glue-dir")
    parser.add_argument("--calibration-rows", type=int, default=300)
    parser.add_argument("--method", nargs="+", default=["minmax"], choices=["minmax", "entropy"],
                        help="calibration (entropy: ONNX Runtime 1.32 refuses rows of different lengths)")  # fmt: skip
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output", type=Path, default=Path("static_int8.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    successor_dir = args.run_dir / "successor"
    datamodule = run_dev_data(args.run_dir, args.glue_dir)
    tokenizer = datamodule.tokenizer
    rows = timing_rows(datamodule, tokenizer, 256)
    cpu = this_cpu()
    reduce_range = int8_reduce_range(cpu.flags)
    calibration = calibration_rows(datamodule, tokenizer, args.calibration_rows)

    models: dict[str, Logits] = {}
    for name, path in (("onnx_fp32", "onnx/model.onnx"), ("onnx_int8_dynamic", "onnx/model_int8.onnx")):
        models[name] = functools.partial(session_logits, inference_session(successor_dir / path, args.threads))
    for name, path in (("openvino_fp32", "openvino/model.xml"), ("openvino_int8", "openvino/model_int8.xml")):
        if (successor_dir / path).is_file():
            compiled = compile_openvino(successor_dir / path, args.threads, "f32")
            models[name] = functools.partial(openvino_logits, compiled)
    with tempfile.TemporaryDirectory() as folder:  # the sessions hold the models: nothing is left in the run
        staging = Path(folder)
        unfused = export_onnx(load_sequence_classifier(successor_dir), own_length_batches(rows, tokenizer, 2)[0],
                              staging / "unfused.onnx")  # fmt: skip
        for method in args.method:
            path = quantize_static_int8(unfused, staging / f"static_{method}.onnx", calibration, reduce_range, method)
            session = inference_session(path, args.threads)
            models[f"onnx_int8_static_{method}"] = functools.partial(session_logits, session)

    scores = {name: dev_score(logits, datamodule) for name, logits in models.items()}
    timers = {
        name: (lambda batch, logits=logits: lambda: logits(batch))  # type: ignore[misc]
        for name, logits in models.items()
    }
    latency, busy = timed_latency(timers, functools.partial(own_length_batches, rows, tokenizer), (1, 32),
                                  args.repeats, OWN_LENGTHS)  # fmt: skip
    report = {
        "cpu": cpu.model,
        "cpu_flags": sorted(cpu.relevant_flags),
        "threads": args.threads,
        "reduce_range": reduce_range,
        "calibration_rows": args.calibration_rows,
        "dev_score": scores,
        "latency_ms": latency,
        "busy_cores": busy,
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
