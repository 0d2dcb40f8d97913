"""A sequence classifier in OpenVINO: converted from the exported ONNX graph, quantised to int8 by NNCF on training
rows, run by OpenVINO's CPU plugin.

OpenVINO and NNCF are called directly: optimum-intel, which wraps them for transformers, pins transformers < 5.6.
The int8 model is *static*: NNCF runs calibration rows through the graph once, fixes every activation's int8 range
from what it saw and corrects the biases the rounding shifts (its transformer preset: SmoothQuant, fast bias
correction); ONNX Runtime's int8 measures each batch's range at run time instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from theseus_pl.core.precision import CPU_BF16_FLAGS
from theseus_pl.deployment.onnx_export import DeploymentError
from theseus_pl.deployment.record import missing_openvino_packages

log = logging.getLogger(__name__)

FOLDER = "openvino"
IR_NAMES = {"openvino_fp32": "model.xml", "openvino_int8": "model_int8.xml"}  # a classifier's, beside onnx/model.onnx
# OpenVINO's CPU plugin runs bf16 where the CPU has bf16 instructions, and then picks it by default for fp32 models:
# each model here is compiled with its precision named, so "fp32" means fp32 on every CPU.
PRECISION_HINTS = {"openvino_fp32": "f32", "openvino_bf16": "bf16", "openvino_int8": "f32"}


def require_openvino() -> None:
    """Fail before any work when the openvino extra is missing, naming it."""
    if missing := missing_openvino_packages():
        raise DeploymentError(
            f"deploy.openvino needs {', '.join(missing)} (not installed): pip install 'theseus_pl[openvino]'."
        )


def openvino_files(successor_dir: Path, quantize: str | None, names: Mapping[str, str] = IR_NAMES) -> dict[str, Path]:
    """The OpenVINO models (IR: an .xml graph beside its .bin weights) a deployment writes, by target, named by
    ``names`` (each kind names them where its users' loaders look)."""
    files = {"openvino_fp32": successor_dir / FOLDER / names["openvino_fp32"]}
    if quantize == "int8":
        files["openvino_int8"] = successor_dir / FOLDER / names["openvino_int8"]
    return files


def calibration_in_words(
    files: Mapping[str, Path], rows: int, what: str = "training rows", asked: int | None = None
) -> str:
    """A dry run's words for the int8 model's calibration where ``files`` name one (else none): on ``rows`` (what
    ``deploy.calibration_rows`` changes), all there are where that is fewer than the ``asked``."""
    fewer = f"; all there are, of the {asked} asked" if asked is not None and rows < asked else ""
    return (
        f"; OpenVINO's int8 calibrated on {rows} {what} (a fixed draw, never dev rows{fewer})"
        if "openvino_int8" in files
        else ""
    )


def compiled_targets(files: Mapping[str, Path], cpu_flags: frozenset[str]) -> dict[str, Path]:
    """The targets to compile, by name, each with its IR: bf16 is the fp32 IR compiled in bf16, on a CPU with bf16
    (none without OpenVINO files)."""
    targets = dict(files)
    if "openvino_fp32" in files and cpu_flags & CPU_BF16_FLAGS:
        targets["openvino_bf16"] = files["openvino_fp32"]
    return targets


def export_openvino(
    onnx_path: Path, files: Mapping[str, Path], calibration: Callable[[], Sequence[Mapping[str, torch.Tensor]]]
) -> int:
    """Write ``files``: the ONNX model at ``onnx_path`` converted to IR, and where ``files`` name an int8 model, that
    IR quantised by NNCF on the batches ``calibration`` gives (drawn only then); how many batches it was calibrated
    on."""
    if not files:
        return 0
    log.info("Converting it to OpenVINO: %s", files["openvino_fp32"])
    convert_openvino(onnx_path, files["openvino_fp32"])
    if "openvino_int8" in files:
        batches = calibration()
        log.info("Quantising it to static int8 with NNCF on %d training rows: %s", len(batches), files["openvino_int8"])
        quantize_openvino(files["openvino_fp32"], files["openvino_int8"], batches)
        return len(batches)
    return 0


def convert_openvino(onnx_path: Path, xml_path: Path) -> Path:
    """The ONNX model at ``onnx_path`` as OpenVINO IR, weights kept in fp32 (OpenVINO's default would halve them)."""
    import openvino

    xml_path.parent.mkdir(parents=True, exist_ok=True)
    openvino.save_model(openvino.convert_model(onnx_path), xml_path, compress_to_fp16=False)
    return xml_path


def quantize_openvino(xml_path: Path, int8_path: Path, calibration: Sequence[Mapping[str, torch.Tensor]]) -> Path:
    """NNCF's post-training int8 quantisation of the IR at ``xml_path``, calibrated on ``calibration`` (model
    batches: each row's own tokens, unpadded, as it will be served)."""
    import nncf
    import openvino

    model = openvino.Core().read_model(xml_path)
    names = {port.get_any_name() for port in model.inputs}
    rows = [{name: tensor.numpy() for name, tensor in batch.items() if name in names} for batch in calibration]
    quantized = nncf.quantize(model, nncf.Dataset(rows), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(rows))
    openvino.save_model(quantized, int8_path)
    return int8_path


def compiled_models(files: Mapping[str, Path], cpu_flags: frozenset[str], threads: int) -> dict[str, Any]:
    """Every target of ``files`` compiled for this CPU (see :func:`compiled_targets`), by name."""
    targets = compiled_targets(files, cpu_flags)
    return {name: compile_openvino(path, threads, PRECISION_HINTS[name]) for name, path in targets.items()}


def compile_openvino(xml_path: Path, threads: int, precision: str) -> Any:
    """The IR compiled for this CPU on ``threads`` threads, one stream, for latency, computing in ``precision``."""
    import openvino

    config = {
        "INFERENCE_PRECISION_HINT": precision,
        "INFERENCE_NUM_THREADS": threads,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
    }
    return openvino.Core().compile_model(xml_path, "CPU", config)


def openvino_logits(compiled: Any, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The compiled model's logits for a model batch (labels and any input the graph does not take left out)."""
    feed = {port.get_any_name(): np.ascontiguousarray(batch[port.get_any_name()].numpy()) for port in compiled.inputs}
    return torch.from_numpy(np.array(compiled(feed)[compiled.output(0)]))


def ir_megabytes(xml_path: Path) -> float:
    """The IR's size on disk: its graph and its weights."""
    return (xml_path.stat().st_size + xml_path.with_suffix(".bin").stat().st_size) / 1e6


def ir_sizes_mb(files: Mapping[str, Path], cpu_flags: frozenset[str]) -> dict[str, float]:
    """Megabytes on disk of each compiled target's IR (bf16 is the fp32 IR's)."""
    return {name: ir_megabytes(path) for name, path in compiled_targets(files, cpu_flags).items()}


def openvino_fields(successor_dir: Path, files: Mapping[str, Path], calibration_rows: int) -> dict[str, str | None]:
    """The ``deployment`` block's OpenVINO fields: the IR files inside the successor's folder, how int8 was made."""
    fp32, int8 = files.get("openvino_fp32"), files.get("openvino_int8")
    made = f"static int8 by NNCF (transformer preset), calibrated on {calibration_rows} training rows"
    return {
        "openvino": str(fp32.relative_to(successor_dir)) if fp32 else None,
        "openvino_int8": str(int8.relative_to(successor_dir)) if int8 else None,
        "calibration": made if int8 else None,
    }
