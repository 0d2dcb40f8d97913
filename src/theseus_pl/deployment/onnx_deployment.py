"""The one ONNX deployment, whatever the model: export, OpenVINO, fusions and int8, the check against PyTorch,
the timings beside the predecessor, the sizes and the pick of a target (:func:`deployed`), given what the kind of model
brings (:class:`ExportedModel`: a classifier's in :mod:`.stage`, a sentence-transformers encoder's in
:mod:`.embedding_stage`); and the ``deployment`` block it returns.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import torch
from transformers import PreTrainedTokenizerBase

from theseus_pl.core.io import (
    PICKLED,
)
from theseus_pl.core.precision import Cpu
from theseus_pl.core.timing import p50_milliseconds, was_busy
from theseus_pl.deployment.onnx_export import (
    DeploymentError,
    export_onnx,
    fused_and_quantized,
    inference_session,
    int8_reduce_range,
)
from theseus_pl.deployment.openvino_export import FOLDER as OPENVINO_FOLDER
from theseus_pl.deployment.openvino_export import (
    IR_NAMES,
    compiled_models,
    export_openvino,
    ir_sizes_mb,
    openvino_fields,
)
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.targets import (
    OWN_LENGTH_BATCHES,
    OWN_LENGTHS,
    OWN_LENGTHS_IN_WORDS,
    SINGLE_ROWS,
    TargetChoice,
    pick_target,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # the largest difference from PyTorch's logits an fp32 ONNX model may show


Timer = Callable[[Mapping[str, torch.Tensor]], Callable[[], object]]  # a batch -> one call of a model on it


class Checked(NamedTuple):
    """The check of the exports against PyTorch: the largest difference of each fp32 export (CHECKED_EXPORTS), each
    model's dev score (None without dev data), and what was checked, for the record."""

    differences: dict[str, float]
    scores: dict[str, float] | None
    checked_on: str


class ExportedModel:
    """What one kind of model brings to the one ONNX deployment (:func:`deployed`): the module exported and its one
    output, the export's example, the OpenVINO files and calibration, the check against PyTorch (and the scores), the
    models timed and their batches. A classifier's is :class:`ExportedClassifier`; a sentence-transformers
    encoder's is :class:`~theseus_pl.deployment.embedding_stage.ExportedEncoder`."""

    exported: str  # what is exported, in the log: "the successor"
    ir_names: Mapping[str, str] = IR_NAMES  # its OpenVINO files' names, by target (where its users' loaders look)
    output: str  # the exported graph's one output (onnx_export.LOGITS, TOKEN_VECTORS)
    compared: str  # what differs from PyTorch's where the check refuses the export: "Exported logits"
    checking: str  # what the exports are checked on, in the log
    own_rows: str | None  # the rows it is timed on again at their own lengths, in the log; None: none to time so
    cpu: Cpu

    def module(self) -> torch.nn.Module:
        raise NotImplementedError

    def example(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def ir_files(self, successor_dir: Path, settings: DeploySettings) -> dict[str, Path]:
        raise NotImplementedError

    def calibration(self, count: int) -> list[dict[str, torch.Tensor]]:
        raise NotImplementedError

    def check(self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]) -> Checked:
        raise NotImplementedError

    def timers(self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]) -> dict[str, Timer]:
        """Each model timed, the predecessor first where there is one, by target name."""
        raise NotImplementedError

    def padded_batches(self, length: int | None, size: int) -> list[dict[str, torch.Tensor]]:
        """The batch a padded latency row is timed on: ``size`` rows, padded (or cut) to ``length``."""
        raise NotImplementedError

    def own_length_batches(self, size: int) -> list[dict[str, torch.Tensor]]:
        """The batches an own-lengths latency row is timed on (:func:`own_length_batches`)."""
        raise NotImplementedError

    def extra_sizes(self) -> dict[str, float]:
        """Sizes of targets beyond the files written (a bf16 copy's weights), in megabytes."""
        return {}


def deployed(part: ExportedModel, successor_dir: Path, settings: DeploySettings, predecessor_dir: Path | None,
             started: float) -> Deployment:  # fmt: skip
    """Export, check, quantise, score and time the successor in ``successor_dir`` as ``part`` says; the
    ``deployment`` block. A successor with a weight that is not finite is refused before its export
    (:func:`refuse_non_finite_weights`), an export whose outputs differ from PyTorch's by more than :data:`TOLERANCE`
    (or are not numbers) after it; whatever ends the deployment before its block (that refusal, the quantiser, NNCF's
    calibration, Ctrl-C in the minutes of timing) removes the files it wrote: they were left without a record, and
    publish uploaded them under a card that says nothing of them."""
    clear_deployment_files(successor_dir, part.ir_names)
    try:
        return _deployed(part, successor_dir, settings, predecessor_dir, started)
    except BaseException:
        clear_deployment_files(successor_dir, part.ir_names)
        raise


def _deployed(part: ExportedModel, successor_dir: Path, settings: DeploySettings, predecessor_dir: Path | None,
              started: float) -> Deployment:  # fmt: skip
    threads = settings.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    files = onnx_files(successor_dir, settings.quantize)
    ir_files = part.ir_files(successor_dir, settings)
    module = part.module()
    refuse_non_finite_weights(module, part.exported)
    log.info("Exporting %s to %s", part.exported, files["onnx_fp32"])
    example = part.example()
    export_onnx(module, example, files["onnx_fp32"], part.output)
    cpu = part.cpu
    # From the unfused graph, made of ONNX's standard operators (fuse_for_ort adds ONNX Runtime's own); int8 only
    # where there are training rows to calibrate on (the part's ir_files).
    calibration = functools.partial(part.calibration, settings.calibration_rows)
    calibrated = export_openvino(files["onnx_fp32"], ir_files, calibration)
    fusions, quantization = fused_and_quantized(
        files["onnx_fp32"], files.get("onnx_int8"), int8_reduce_range(cpu.flags), example, TOLERANCE / 10, part.output
    )
    log.info("ONNX Runtime fusions in %s: %s", files["onnx_fp32"].name, fusions or "none (the unfused graph is kept)")
    sessions = {name: inference_session(path, threads) for name, path in files.items()}
    compiled = compiled_models(ir_files, cpu.flags, threads)

    log.info("Checking the exported models against PyTorch on %s", part.checking)
    checked = part.check(sessions, compiled)
    refused = {name: value for name, value in checked.differences.items() if not value <= TOLERANCE}
    if refused:  # its files removed by deployed
        raise DeploymentError(
            f"{part.compared} differ from PyTorch's beyond the tolerance "
            f"{TOLERANCE:g}: {', '.join(f'{name} by up to {value:.2e}' for name, value in refused.items())}; "
            f"the exported files in {successor_dir / 'onnx'} and {successor_dir / OPENVINO_FOLDER} removed. The "
            "PyTorch successor is kept."
        )
    timers = part.timers(sessions, compiled)
    log.info("Timing %s at batch sizes %s on %d threads", ", ".join(timers), list(settings.batch_sizes), threads)
    padded = functools.partial(part.padded_batches, settings.sequence_length)
    latency, busy = timed_latency(timers, padded, settings.batch_sizes, settings.repeats)
    if settings.own_lengths and part.own_rows is not None:
        log.info("Timing them again on %s at their own lengths (%s)", part.own_rows, OWN_LENGTHS_IN_WORDS)
        own = part.own_length_batches
        own_latency, own_busy = timed_latency(timers, own, settings.batch_sizes, settings.repeats, OWN_LENGTHS)
        latency, busy = latency | own_latency, busy | own_busy
    sizes = sizes_mb(successor_dir, predecessor_dir, files) | ir_sizes_mb(ir_files, cpu.flags) | part.extra_sizes()
    sizes = {name: sizes[name] for name in timers if name in sizes}  # in the latency table's order
    choice = pick_target(settings.target, latency, checked.scores, settings.max_score_drop)
    log.info("Deploy target: %s (%s)", choice.target, choice.reason)
    return onnx_deployment(
        successor_dir, files, quantization, replace(settings, threads=threads), started, cpu, latency, busy, sizes,
        choice, checked_on=checked.checked_on, max_abs_diff=max(checked.differences.values()),
        dev_score=checked.scores, versions=deployment_versions(openvino=bool(ir_files)), fusions=fusions,
        **openvino_fields(successor_dir, ir_files, calibrated),
    )  # fmt: skip


def refuse_non_finite_weights(module: torch.nn.Module, exported: str) -> None:
    """Refuse, before any export, a module with a weight that is not finite (a diverged run's NaN): its exports'
    outputs would be NaN, refused by the check only after the export and the quantisation, and ONNX Runtime's int8
    quantiser failed on it first with a bare ``AssertionError: scale issue`` (its int8 scale from a NaN range)."""
    weights = dict(module.named_parameters())
    non_finite = [name for name, weight in weights.items() if not weight.isfinite().all()]
    if non_finite:
        more = ", ..." if len(non_finite) > 1 else ""
        raise DeploymentError(
            f"{exported[0].upper()}{exported[1:]}'s weights are not all finite: {len(non_finite)} of its "
            f"{len(weights)} parameters hold NaN or infinity ({non_finite[0]}{more}), as a diverged training leaves "
            "them. Its exports would output NaN and ONNX Runtime's int8 quantiser fails on them: nothing was "
            "exported. The PyTorch successor is kept."
        )


def onnx_deployment(
    successor_dir: Path,
    files: Mapping[str, Path],
    quantization: str | None,
    settings: DeploySettings,
    started: float,
    cpu: Cpu,
    latency: dict[str, dict[str, float]],
    busy: dict[str, float],
    sizes: dict[str, float],
    choice: TargetChoice,
    **measured: Any,
) -> Deployment:
    """The ``deployment`` block, with the fields every ONNX deployment fills alike (the files, how the int8 one was
    made, the timings and the ratios over the predecessor, the CPU, the pick); ``measured``: the rest (what was
    checked, the scores, the versions, the fusions, OpenVINO's files)."""
    return Deployment(
        onnx=str(files["onnx_fp32"].relative_to(successor_dir)),
        onnx_int8=str(files["onnx_int8"].relative_to(successor_dir)) if "onnx_int8" in files else None,
        quantization=quantization,
        tolerance=TOLERANCE,
        latency_ms=latency,
        speedup_over_predecessor={
            row: None if row in busy else times_over_predecessor(values) for row, values in latency.items()
        },
        busy_cores=busy,
        size_mb=sizes,
        smaller_than_predecessor=times_over_predecessor(sizes),
        settings=settings,
        seconds=time.perf_counter() - started,
        cpu=cpu.model,
        cpu_flags=cpu.relevant_flags,
        target=choice.target,
        target_reason=choice.reason,
        **measured,
    )


def timed_latency(
    timers: Mapping[str, Timer],
    batches_of: Callable[[int], Sequence[Mapping[str, torch.Tensor]]],
    sizes: Sequence[int],
    repeats: int,
    suffix: str = "",
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Each model's p50 milliseconds a batch over ``batches_of(size)`` (run one after another; the models taking
    turns) for each of ``sizes``, in rows ``batch_<size><suffix>``, and the other processes' cores at each size timed
    on a busy machine (its speed-ups are then not recorded)."""
    latency, busy = {}, {}
    for size in sizes:
        batches = batches_of(size)
        calls = {name: _one_after_another([timer(batch) for batch in batches]) for name, timer in timers.items()}
        milliseconds, other_cores = p50_milliseconds(calls, repeats)
        row = f"batch_{size}{suffix}"
        latency[row] = {name: value / len(batches) for name, value in milliseconds.items()}
        if was_busy(other_cores):
            log.warning("Batch %d was timed while other processes kept %.1f cores busy: no speed-up is recorded for "
                        "it. Time it again alone: python -m theseus_pl.deploy RUN_DIR", size, other_cores)  # fmt: skip
            busy[row] = other_cores
    return latency, busy


def own_length_batches(
    rows: Sequence[Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase, size: int
) -> list[dict[str, torch.Tensor]]:
    """Dev rows as a server meets them (:func:`own_length_groups`, by token count), each group padded to its own
    longest row (as sentence-transformers' ``encode`` and a length-bucketing server batch them); a group of fewer
    rows than ``size`` is repeated to fill it."""
    groups = own_length_groups(rows, size, lambda row: len(row["input_ids"]))
    return [padded_batch(group, tokenizer, size) for group in groups]


def own_length_groups(rows: Sequence[T], size: int, length: Callable[[T], int]) -> list[list[T]]:
    """The dev rows an own-lengths row is timed on: at batch 1 the first :data:`SINGLE_ROWS` one at a time; at a
    larger size the first :data:`OWN_LENGTH_BATCHES` x ``size`` sorted by ``length`` and cut into groups of ``size``
    (all of them as one group where there are fewer). Its texts' groups time a model that tokenises for itself
    (model2vec's static model) on the rows the exported models are timed on."""
    if size == 1:
        return [[row] for row in rows[:SINGLE_ROWS]]
    picked = sorted(rows[: OWN_LENGTH_BATCHES * size], key=length)
    return [picked[start : start + size] for start in range(0, len(picked) - size + 1, size)] or [picked]


def deployment_files(successor_dir: Path, ir_names: Mapping[str, str]) -> list[Path]:
    """Every file a deployment writes in the successor's ``onnx/`` and ``openvino/``: the ONNX models, a checkpoint's
    record (``onnx/deployment.json``), and each OpenVINO model's graph and weights, named by ``ir_names`` (the
    kind's: :attr:`ExportedModel.ir_names`)."""
    graphs = [successor_dir / OPENVINO_FOLDER / name for name in ir_names.values()]
    return [*onnx_files(successor_dir, "int8").values(), successor_dir / "onnx" / "deployment.json",
            *(path for graph in graphs for path in (graph, graph.with_suffix(".bin")))]  # fmt: skip


def clear_deployment_files(successor_dir: Path, ir_names: Mapping[str, str]) -> None:
    """Remove what a deployment writes (:func:`deployment_files`), before it exports: the folders then hold what the
    new block describes, and none an earlier deployment's files the block does not name (an OpenVINO model left from
    a deploy with ``openvino`` beside a block without it). Removed again where a check refuses the export. Other files
    stay (a hub checkpoint ships its own ONNX variants there); a folder left empty goes."""
    for path in deployment_files(successor_dir, ir_names):
        path.unlink(missing_ok=True)
    for folder in (successor_dir / "onnx", successor_dir / OPENVINO_FOLDER):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def onnx_files(successor_dir: Path, quantize: str | None) -> dict[str, Path]:
    """The ONNX models a deployment writes beside the checkpoint, by target: fp32, and int8 when quantised."""
    files = {"onnx_fp32": successor_dir / "onnx" / "model.onnx"}
    if quantize == "int8":
        files["onnx_int8"] = successor_dir / "onnx" / "model_int8.onnx"
    return files


def padded_batch(
    rows: Sequence[Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase, size: int, length: int | None = None
) -> dict[str, torch.Tensor]:
    """``size`` rows (repeated when there are fewer), cut and padded to ``length`` tokens, or to their longest."""
    picked = [{key: value[:length] for key, value in rows[i % len(rows)].items()} for i in range(size)]
    padding = {"padding": "max_length", "max_length": length} if length else {"padding": "longest"}
    return dict(tokenizer.pad(picked, return_tensors="pt", **padding))


def _one_after_another(calls: Sequence[Callable[[], object]]) -> Callable[[], object]:
    return lambda: [call() for call in calls]


def times_over_predecessor(values: Mapping[str, float]) -> dict[str, float] | None:
    """How many times the predecessor's figure each other figure is (faster, smaller); None without one."""
    base = values.get("pytorch_predecessor")
    return (
        None
        if base is None
        else {name: base / value for name, value in values.items() if name != "pytorch_predecessor"}
    )


def sizes_mb(successor_dir: Path, predecessor_dir: Path | None, files: Mapping[str, Path]) -> dict[str, float]:
    """Megabytes on disk: the checkpoints' weights (safetensors, or a pickled successor's module) and each ONNX
    file."""
    sizes = {"pytorch_successor": _weights_mb(successor_dir)}
    if predecessor_dir is not None and any(Path(predecessor_dir).glob("*.safetensors")):
        sizes = {"pytorch_predecessor": _weights_mb(Path(predecessor_dir)), **sizes}
    sizes.update({name: path.stat().st_size / 1e6 for name, path in files.items()})
    return sizes


def _weights_mb(directory: Path) -> float:
    weights = [*directory.glob("*.safetensors"), *directory.glob(PICKLED)]
    return sum(path.stat().st_size for path in weights) / 1e6


def deployment_versions(openvino: bool) -> dict[str, str]:
    import onnx
    import onnxruntime

    versions = {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}
    if openvino:
        import nncf
        import openvino as ov

        versions.update(openvino=ov.__version__, nncf=nncf.__version__)
    return versions
