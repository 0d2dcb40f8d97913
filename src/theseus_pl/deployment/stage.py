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
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from theseus_pl.core.io import (
    TOKENIZER_FILES,
    WEIGHT_FILES,
    has_tokenizer,
    has_weights,
    is_sequence_classifier,
    load_successor,
)
from theseus_pl.core.precision import CPU_BF16_FLAGS, cpu_bf16_problem, this_cpu
from theseus_pl.core.timing import forward_call
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.deployment.onnx_deployment import (
    Checked,
    ExportedModel,
    Timer,
    deployed,
    own_length_batches,
    padded_batch,
)
from theseus_pl.deployment.onnx_export import (
    LOGITS,
    DeploymentError,
    require_onnxruntime,
    session_logits,
)
from theseus_pl.deployment.openvino_export import (
    openvino_files,
    openvino_logits,
    require_openvino,
)
from theseus_pl.deployment.record import Deployment, DeploySettings
from theseus_pl.deployment.targets import (
    CHECKED_EXPORTS,
    OWN_LENGTH_BATCHES,
)
from theseus_pl.lightning.metrics import TaskMetrics

log = logging.getLogger(__name__)

EXPORT_LENGTH = 16  # tokens of the export's example rows: any length above 1 keeps the sequence axis dynamic
EXAMPLE_SENTENCES = (  # checked and timed on these when no dev data is given
    "A gripping story, beautifully told.",
    "The plot never gets going and the jokes fall flat.",
    "It is neither the best nor the worst film of the year.",
    "Two hours I will not get back.",
)


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
        return padded_batch(self.rows, self.tokenizer, 2, EXPORT_LENGTH)

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
        return [padded_batch(self.rows, self.tokenizer, size, length)]

    def own_length_batches(self, size: int) -> list[dict[str, torch.Tensor]]:
        return own_length_batches(self.rows, self.tokenizer, size)

    def extra_sizes(self) -> dict[str, float]:
        if self.bf16 is None:
            return {}
        return {"pytorch_bf16": sum(t.numel() * t.element_size() for t in self.bf16.state_dict().values()) / 1e6}


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


def calibration_count(datamodule: TextTaskDataModule, count: int) -> int:
    """How many training rows OpenVINO's int8 model is calibrated on: ``count`` (``deploy.calibration_rows``), or
    every one where the training split has fewer (the deployment draws them; its dry run says how many)."""
    return min(count, len(datamodule.split("train")))


def calibration_rows(
    datamodule: TextTaskDataModule, tokenizer: PreTrainedTokenizerBase, count: int
) -> list[dict[str, torch.Tensor]]:
    """``count`` training rows (never dev rows; :func:`calibration_count` of them), the same draw on every
    deployment of a run, each its own batch at its own length, as a served sentence comes."""
    split = datamodule.split("train")
    drawn = split.shuffle(seed=datamodule.seed).select(range(calibration_count(datamodule, count)))
    return [padded_batch([_model_inputs(row, tokenizer)], tokenizer, 1, None) for row in drawn]


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
    split = datamodule.split(datamodule.task.eval_splits[0])
    return [_model_inputs(row, tokenizer) for row in split.select(range(min(limit, len(split))))]


def _check_batches(
    datamodule: TextTaskDataModule | None, rows: Sequence[Mapping[str, Any]], tokenizer: PreTrainedTokenizerBase
) -> list[tuple[int, dict[str, torch.Tensor]]]:
    """(dev set index, batch) for every batch of every dev set; the example rows as one batch without one."""
    if datamodule is None:
        return [(0, padded_batch(rows, tokenizer, len(rows), None))]
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
                difference = float((logits[name] - logits["pytorch_successor"]).abs().max())
                # NaN ranks above every number: max(0.0, nan) is 0.0, and NaN logits passed the check as exact
                differences[name] = max(largest, difference, key=lambda value: (math.isnan(value), value))
            for name, metric in metrics.items():
                metric.update(logits[name], batch["labels"], eval_index=index)
    scores = {name: metric.compute()["score"] for name, metric in metrics.items()} or None
    return differences, scores


def _without_labels(batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {key: value for key, value in batch.items() if key != "labels"}


def _onnx_call(session: Any, batch: Mapping[str, torch.Tensor]) -> Callable[[], object]:
    return lambda: session_logits(session, batch)


def _openvino_call(compiled: Any, batch: Mapping[str, torch.Tensor]) -> Callable[[], object]:
    return lambda: openvino_logits(compiled, batch)
