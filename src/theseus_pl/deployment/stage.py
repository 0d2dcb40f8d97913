"""The deploy stage: the successor as ONNX (and int8), and in OpenVINO, checked against PyTorch on dev rows and
timed beside it.

Writes ``onnx/model.onnx`` (dynamic batch and sequence axes) and ``onnx/model_int8.onnx`` beside the checkpoint, with
``deploy.openvino`` also ``openvino/model.xml`` and ``openvino/model_int8.xml``, and returns the ``deployment`` block
(:class:`Deployment`); ``python -m theseus_pl.deploy`` and a run's ``deploy.onnx=true`` call it.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import torch
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from theseus_pl.core.io import (
    PICKLED,
    TOKENIZER_FILES,
    WEIGHT_FILES,
    has_tokenizer,
    has_weights,
    is_sequence_classifier,
    load_successor,
)
from theseus_pl.core.precision import CPU_BF16_FLAGS, Cpu, cpu_bf16_problem, this_cpu
from theseus_pl.core.timing import forward_call, p50_milliseconds, was_busy
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.deployment.onnx_export import (
    LOGITS,
    DeploymentError,
    export_onnx,
    fused_and_quantized,
    inference_session,
    int8_reduce_range,
    require_onnxruntime,
    session_logits,
)
from theseus_pl.deployment.openvino_export import FOLDER as OPENVINO_FOLDER
from theseus_pl.deployment.openvino_export import (
    compiled_models,
    export_openvino,
    ir_sizes_mb,
    openvino_fields,
    openvino_files,
    openvino_logits,
    require_openvino,
)
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.targets import (
    CHECKED_EXPORTS,
    OWN_LENGTH_BATCHES,
    OWN_LENGTHS,
    OWN_LENGTHS_IN_WORDS,
    SINGLE_ROWS,
    TargetChoice,
    pick_target,
)
from theseus_pl.lightning.metrics import TaskMetrics

log = logging.getLogger(__name__)

TOLERANCE = 1e-4  # the largest difference from PyTorch's logits an fp32 ONNX model may show
EXPORT_LENGTH = 16  # tokens of the export's example rows: any length above 1 keeps the sequence axis dynamic
Timer = Callable[[Mapping[str, torch.Tensor]], Callable[[], object]]  # a batch -> one call of a model on it
EXAMPLE_SENTENCES = (  # checked and timed on these when no dev data is given
    "A gripping story, beautifully told.",
    "The plot never gets going and the jokes fall flat.",
    "It is neither the best nor the worst film of the year.",
    "Two hours I will not get back.",
)


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
    ``deployment`` block. An export whose outputs differ from PyTorch's by more than :data:`TOLERANCE` is refused
    and the exported folders removed, so nothing unchecked is left to ship."""
    threads = settings.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    files = onnx_files(successor_dir, settings.quantize)
    ir_files = part.ir_files(successor_dir, settings)
    exported_dirs = cleared_export_folders(successor_dir)
    log.info("Exporting %s to %s", part.exported, files["onnx_fp32"])
    example = part.example()
    export_onnx(part.module(), example, files["onnx_fp32"], part.output)
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
    if refused:
        for folder in exported_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        raise DeploymentError(
            f"{part.compared} differ from PyTorch's beyond the tolerance "
            f"{TOLERANCE:g}: {', '.join(f'{name} by up to {value:.2e}' for name, value in refused.items())}; "
            f"{', '.join(str(folder) for folder in sorted(exported_dirs))} removed. The PyTorch successor is kept."
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


def deploy(
    successor_dir: Path,
    settings: DeploySettings,
    datamodule: TextTaskDataModule | None = None,
    predecessor: PreTrainedModel | None = None,
    predecessor_dir: Path | None = None,
) -> Deployment:
    """Export, check, quantise, score and time the sequence classifier in ``successor_dir`` (:func:`deployed`) on
    ``datamodule``'s dev set (without one, on a few example sentences, with no score); the ``deployment`` block."""
    started = time.perf_counter()
    require_onnxruntime()
    if settings.openvino:
        require_openvino()
    check_sequence_classifier(successor_dir, settings.sequence_length)
    if predecessor_dir is not None:
        check_sequence_classifier(predecessor_dir, settings.sequence_length)
    check_tokenizer(successor_dir)
    part = ExportedClassifier(successor_dir, settings, datamodule, predecessor)
    return deployed(part, successor_dir, settings, predecessor_dir, started)


class ExportedClassifier(ExportedModel):
    """A sequence classifier: its logits exported, checked and scored on the dev set (the task's metric), timed
    beside the predecessor and, where the CPU runs bf16, a bf16 copy."""

    exported, output, compared = "the successor", LOGITS, "Exported logits"

    def __init__(
        self,
        successor_dir: Path,
        settings: DeploySettings,
        datamodule: TextTaskDataModule | None,
        predecessor: PreTrainedModel | None,
    ) -> None:
        self.successor = load_successor(successor_dir)
        self.tokenizer = datamodule.tokenizer if datamodule else AutoTokenizer.from_pretrained(successor_dir)
        self.rows = timing_rows(datamodule, self.tokenizer, max(2, OWN_LENGTH_BATCHES * max(settings.batch_sizes)))
        self.datamodule, self.predecessor = datamodule, predecessor
        self.checking = "the dev set" if datamodule else "example sentences"
        self.own_rows = "dev rows" if datamodule else None
        self.cpu = this_cpu()
        self.bf16 = _bf16_copy(self.successor, settings.target, self.cpu.flags)

    def module(self) -> torch.nn.Module:
        return self.successor

    def example(self) -> dict[str, torch.Tensor]:
        return _batch(self.rows, self.tokenizer, 2, EXPORT_LENGTH)

    def ir_files(self, successor_dir: Path, settings: DeploySettings) -> dict[str, Path]:
        return planned_openvino_files(successor_dir, settings, has_training_rows=self.datamodule is not None)

    def calibration(self, count: int) -> list[dict[str, torch.Tensor]]:
        assert self.datamodule is not None  # ir_files names an int8 model only with training rows
        return calibration_rows(self.datamodule, self.tokenizer, count)

    def check(self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]) -> Checked:
        batches = _check_batches(self.datamodule, self.rows, self.tokenizer)
        scorers: dict[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]] = {}
        if (bf16 := self.bf16) is not None:
            scorers["pytorch_bf16"] = lambda batch: bf16(**_without_labels(batch)).logits.float()
        scorers.update({name: functools.partial(session_logits, session) for name, session in sessions.items()})
        scorers.update({name: functools.partial(openvino_logits, model) for name, model in compiled.items()})
        differences, scores = _compare(self.successor, scorers, batches, self.datamodule)
        rows = sum(len(batch["input_ids"]) for _, batch in batches)
        what = "dev rows" if self.datamodule else "example sentences (no dev data given)"
        return Checked(differences, scores, f"{rows} {what}")

    def timers(self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]) -> dict[str, Timer]:
        timers: dict[str, Timer] = {}
        if self.predecessor is not None:
            timers["pytorch_predecessor"] = functools.partial(forward_call, self.predecessor.cpu())
        timers["pytorch_successor"] = functools.partial(forward_call, self.successor)
        if self.bf16 is not None:
            timers["pytorch_bf16"] = functools.partial(forward_call, self.bf16)
        timers.update({name: functools.partial(_onnx_call, session) for name, session in sessions.items()})
        timers.update({name: functools.partial(_openvino_call, model) for name, model in compiled.items()})
        return timers

    def padded_batches(self, length: int | None, size: int) -> list[dict[str, torch.Tensor]]:
        return [_batch(self.rows, self.tokenizer, size, length)]

    def own_length_batches(self, size: int) -> list[dict[str, torch.Tensor]]:
        return own_length_batches(self.rows, self.tokenizer, size)

    def extra_sizes(self) -> dict[str, float]:
        if self.bf16 is None:
            return {}
        return {"pytorch_bf16": sum(t.numel() * t.element_size() for t in self.bf16.state_dict().values()) / 1e6}


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
    """Dev rows as a server meets them: at batch 1 the first :data:`SINGLE_ROWS` one at a time, unpadded; at a larger
    size the first :data:`OWN_LENGTH_BATCHES` x ``size`` sorted by length and cut into batches of ``size``, each padded
    to its own longest row (as sentence-transformers' ``encode`` and a length-bucketing server batch them)."""
    if size == 1:
        return [_batch([row], tokenizer, 1) for row in rows[:SINGLE_ROWS]]
    picked = sorted(rows[: OWN_LENGTH_BATCHES * size], key=lambda row: len(row["input_ids"]))
    starts = range(0, len(picked) - size + 1, size)
    return [_batch(picked[start : start + size], tokenizer, size) for start in starts] or [
        _batch(picked, tokenizer, size)  # fewer rows than one batch: repeated to fill it
    ]


def cleared_export_folders(successor_dir: Path) -> list[Path]:
    """The folders a deployment writes into the successor's (``onnx/``, ``openvino/``), emptied before it exports:
    each then holds what the new block describes, and none keeps an earlier deployment's files the block does not
    name (an OpenVINO model left from a deploy with ``openvino`` beside a block without it). Removed again where a
    check refuses the export."""
    folders = [successor_dir / "onnx", successor_dir / OPENVINO_FOLDER]
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    return folders


def planned_openvino_files(successor_dir: Path, settings: DeploySettings, has_training_rows: bool) -> dict[str, Path]:
    """The OpenVINO models ``settings`` ask for: none without ``deploy.openvino``, and no int8 one without training
    rows to calibrate it on (a model folder deployed without ``--task``)."""
    if not settings.openvino:
        return {}
    files = openvino_files(successor_dir, settings.quantize)
    if not has_training_rows and "openvino_int8" in files:
        log.warning("No training rows to calibrate OpenVINO's int8 model on (no task given): fp32 only.")
        del files["openvino_int8"]
    return files


def calibration_rows(
    datamodule: TextTaskDataModule, tokenizer: PreTrainedTokenizerBase, count: int
) -> list[dict[str, torch.Tensor]]:
    """``count`` training rows (never dev rows), the same draw on every deployment of a run, each its own batch at
    its own length, as a served sentence comes."""
    if "train" not in datamodule.splits:
        datamodule.setup("fit")
    split = datamodule.splits["train"]
    drawn = split.shuffle(seed=datamodule.seed).select(range(min(count, len(split))))
    return [_batch([_model_inputs(row, tokenizer)], tokenizer, 1, None) for row in drawn]


def onnx_files(successor_dir: Path, quantize: str | None) -> dict[str, Path]:
    """The ONNX models a deployment writes beside the checkpoint, by target: fp32, and int8 when quantised."""
    files = {"onnx_fp32": successor_dir / "onnx" / "model.onnx"}
    if quantize == "int8":
        files["onnx_int8"] = successor_dir / "onnx" / "model_int8.onnx"
    return files


def load_sequence_classifier(directory: Path) -> PreTrainedModel:
    """The checkpoint in ``directory``, refused with a clear message unless it is a sequence classifier."""
    check_sequence_classifier(directory)
    return load_successor(directory)


def check_sequence_classifier(directory: Path, sequence_length: int | None = None) -> None:
    """Refuse ``directory`` unless its config names a sequence classifier whose weights are there and whose positions
    take ``sequence_length`` tokens (the timing batches' length): read before any weights are, so a dry run refuses
    what the deployment would fail on after its export."""
    if not (directory / "config.json").is_file():
        raise DeploymentError(f"{directory} holds no config.json: it is not a Hugging Face checkpoint folder.")
    config = AutoConfig.from_pretrained(directory)
    if not is_sequence_classifier(config):
        raise DeploymentError(
            f"{directory} is not a sequence-classification checkpoint (its architectures: "
            f"{', '.join(config.architectures or []) or 'none'}); deploy exports the classifiers theseus_pl writes."
        )
    if not has_weights(directory):
        raise DeploymentError(f"{directory} holds no weights ({' or '.join(WEIGHT_FILES[::2])}): copy them beside "
                              "its config.json.")  # fmt: skip
    limit = token_limit(directory, config)
    if sequence_length is not None and limit is not None and sequence_length > limit:
        raise DeploymentError(
            f"--sequence-length {sequence_length} is more than {directory} takes: {limit} tokens; give at most {limit}."
        )


def token_limit(directory: Path, config: PretrainedConfig) -> int | None:
    """The most tokens a row may have: the config's positions, or fewer where the tokenizer saved beside it says so
    (RoBERTa's 514 positions take 512 tokens: two are its padding offset)."""
    limits = [getattr(config, "max_position_embeddings", None)]
    tokenizer_config = directory / "tokenizer_config.json"
    if tokenizer_config.is_file():
        limits.append(json.loads(tokenizer_config.read_text()).get("model_max_length"))
    known = [int(limit) for limit in limits if isinstance(limit, int | float) and 0 < limit < 1e9]  # 1e30: unset
    return min(known, default=None)


def check_tokenizer(directory: Path) -> None:
    """Refuse a model to deploy that has no tokenizer saved beside it (a dry run checks this too)."""
    if not has_tokenizer(directory):
        raise DeploymentError(
            f"{directory} holds no tokenizer ({', '.join(TOKENIZER_FILES[:2])} or a vocabulary): its dev rows would "
            "be tokenised with an empty vocabulary, and every score and timing would be of that. Save the model's "
            "tokenizer beside it (tokenizer.save_pretrained(folder))."
        )


def _model_inputs(row: Mapping[str, Any], tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    return {name: row[name] for name in tokenizer.model_input_names if name in row}


def timing_rows(
    datamodule: TextTaskDataModule | None, tokenizer: PreTrainedTokenizerBase, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` tokenised rows, without labels, for the export's example and the timing batches: the first
    dev rows if there is dev data."""
    if datamodule is None:
        return [_model_inputs(tokenizer(sentence), tokenizer) for sentence in EXAMPLE_SENTENCES]
    split = datamodule.splits[datamodule.task.eval_splits[0]]
    return [_model_inputs(row, tokenizer) for row in split.select(range(min(limit, len(split))))]


def _batch(
    rows: Sequence[Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase, size: int, length: int | None = None
) -> dict[str, torch.Tensor]:
    """``size`` rows (repeated when there are fewer), cut and padded to ``length`` tokens, or to their longest."""
    picked = [{key: value[:length] for key, value in rows[i % len(rows)].items()} for i in range(size)]
    padding = {"padding": "max_length", "max_length": length} if length else {"padding": "longest"}
    return dict(tokenizer.pad(picked, return_tensors="pt", **padding))


def _one_after_another(calls: Sequence[Callable[[], object]]) -> Callable[[], object]:
    return lambda: [call() for call in calls]


def _check_batches(
    datamodule: TextTaskDataModule | None, rows: Sequence[Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase
) -> list[tuple[int, dict[str, torch.Tensor]]]:
    """(dev set index, batch) for every batch of every dev set; the example rows as one batch without one."""
    if datamodule is None:
        return [(0, _batch(rows, tokenizer, len(rows), None))]
    loaders = datamodule.val_dataloader()
    loaders = loaders if isinstance(loaders, list) else [loaders]
    return [(index, batch) for index, loader in enumerate(loaders) for batch in loader]


def _bf16_copy(successor: PreTrainedModel, target: str, cpu_flags: frozenset[str]) -> PreTrainedModel | None:
    """The successor with bf16 weights, a deployment target beside ONNX where the CPU has bf16 instructions (AVX-512
    BF16, AMX) or ``deploy.target`` names it. Elsewhere torch emulates bf16: on an AVX2-only EPYC it ran at 0.14-0.48x
    the fp32 successor's speed, a minute of a 3.5-minute deployment spent timing a model ``auto`` never picks, so it
    is left out. None
    too where this torch build cannot run bf16 on the CPU (refused when ``deploy.target`` asks for it)."""
    if target != "pytorch_bf16" and not cpu_flags & CPU_BF16_FLAGS:
        log.info("No bf16 copy timed: this CPU has no bf16 instructions (%s); deploy.target=pytorch_bf16 times it",
                 " or ".join(sorted(CPU_BF16_FLAGS)))  # fmt: skip
        return None
    problem = cpu_bf16_problem()
    if problem is None:
        return copy.deepcopy(successor).to(torch.bfloat16).eval()
    if target == "pytorch_bf16":
        raise DeploymentError(f"deploy.target=pytorch_bf16: this torch build cannot run bf16 on the CPU ({problem}).")
    return None


def _compare(
    successor: PreTrainedModel,
    scorers: Mapping[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]],
    batches: Sequence[tuple[int, Mapping[str, torch.Tensor]]],
    datamodule: TextTaskDataModule | None,
) -> tuple[dict[str, float], dict[str, float] | None]:
    """The largest |export - PyTorch| logit of each fp32 export (:data:`CHECKED_EXPORTS`), and each model's dev
    score (None without dev data); ``scorers`` give each other model's logits for a batch."""
    names = ("pytorch_successor", *scorers) if datamodule else ()
    metrics = {name: TaskMetrics.for_task(datamodule.task) for name in names}
    differences = dict.fromkeys((name for name in CHECKED_EXPORTS if name in scorers), 0.0)
    with torch.inference_mode():
        for index, batch in batches:
            logits = {"pytorch_successor": successor(**_without_labels(batch)).logits}
            logits.update({name: scorer(batch) for name, scorer in scorers.items()})
            for name, largest in differences.items():
                differences[name] = max(largest, float((logits[name] - logits["pytorch_successor"]).abs().max()))
            for name, metric in metrics.items():
                metric.update(logits[name], batch["labels"], eval_index=index)
    scores = {name: metric.compute()["score"] for name, metric in metrics.items()} or None
    return differences, scores


def _without_labels(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {key: value for key, value in batch.items() if key != "labels"}


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


def _onnx_call(session: Any, batch: Mapping[str, torch.Tensor]) -> Callable[[], object]:
    return lambda: session_logits(session, batch)


def _openvino_call(compiled: Any, batch: Mapping[str, torch.Tensor]) -> Callable[[], object]:
    return lambda: openvino_logits(compiled, batch)
