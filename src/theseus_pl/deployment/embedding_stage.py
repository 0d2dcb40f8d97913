"""The deploy stage of a sentence-embedding successor: its encoder as ONNX (and OpenVINO) where sentence-transformers'
backends look for it, checked against PyTorch's sentence vectors, scored on STS pairs and timed beside the predecessor.

Writes ``onnx/model.onnx`` (inputs as the tokenizer names them, one output ``last_hidden_state``, batch and sequence
axes dynamic) and ``onnx/model_int8.onnx`` into the successor's folder, the layout
``SentenceTransformer(path, backend="onnx")`` reads (the int8 file with ``model_kwargs={"file_name":
"model_int8.onnx"}``); with ``openvino``, ``openvino/openvino_model.xml`` (the name ``backend="openvino"`` loads by
default) and ``openvino/openvino_model_qint8_quantized.xml`` (the name sentence-transformers' own static int8 export
writes), calibrated on the run's training sentences. As in those backends, the graph is the encoder alone: pooling and
normalisation stay the folder's own sentence-transformers modules, and every check here runs the exported token
vectors through them.

The block returned is the classifiers' :class:`~theseus_pl.deployment.record.Deployment`, read for sentence vectors:
``max_abs_diff`` is the largest difference from PyTorch's vectors, ``dev_score`` the STS Spearman (x100) of each
model.
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from theseus_pl.core.embeddings import embedding_encoder, load_embedding_model, pair_spearman, sentence_head
from theseus_pl.core.precision import this_cpu
from theseus_pl.core.sentence_objective import sentence_output
from theseus_pl.deployment.onnx_export import (
    TOKEN_VECTORS,
    DeploymentError,
    export_onnx,
    fused_and_quantized,
    inference_session,
    int8_reduce_range,
    require_onnxruntime,
    session_logits,
)
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
from theseus_pl.deployment.stage import (
    EXAMPLE_SENTENCES,
    EXPORT_LENGTH,
    TOLERANCE,
    cleared_export_folders,
    deployment_versions,
    onnx_deployment,
    onnx_files,
    own_length_batches,
    sizes_mb,
    timed_latency,
)
from theseus_pl.deployment.targets import (
    AUTO,
    CHECKED_EXPORTS,
    OWN_LENGTH_BATCHES,
    OWN_LENGTHS,
    OWN_LENGTHS_IN_WORDS,
    REFERENCE,
    pick_target,
)

log = logging.getLogger(__name__)

# What this kind deploys; PyTorch in bf16 is the classifiers' alone.
EMBEDDING_TARGETS = (REFERENCE, "onnx_fp32", "onnx_int8", "openvino_fp32", "openvino_bf16", "openvino_int8")
# Where sentence-transformers' OpenVINO backend looks: its default file, and its own static int8 export's name.
SENTENCE_TRANSFORMERS_IR = {
    "openvino_fp32": "openvino_model.xml",
    "openvino_int8": "openvino_model_qint8_quantized.xml",
}
CHECK_BATCH = 32  # sentences a batch when checking and scoring
SentenceModel = Any  # a SentenceTransformer: sentence-transformers is an extra, imported by core.embeddings


@dataclass(frozen=True)
class StsPairs:
    """Sentence pairs with gold similarity scores (STS-B dev): what every deployed model is scored on."""

    sentences1: Sequence[str]
    sentences2: Sequence[str]
    scores: Sequence[float]

    @property
    def sentences(self) -> list[str]:
        return [*self.sentences1, *self.sentences2]


def check_embedding_settings(settings: DeploySettings) -> None:
    """Refuse, before any work, what this kind's deployment does not build or this machine cannot run."""
    if settings.openvino:
        require_openvino()
    if settings.target not in (AUTO, *EMBEDDING_TARGETS):
        raise DeploymentError(
            f"deploy.target={settings.target}: a sentence-embedding run deploys {', '.join(EMBEDDING_TARGETS)} "
            f"(or {AUTO})."
        )


def deploy_embedding_model(
    successor_dir: Path,
    settings: DeploySettings,
    pairs: StsPairs | None = None,
    predecessor: SentenceModel | None = None,
    predecessor_dir: Path | None = None,
    training_sentences: Sequence[str] = (),
) -> Deployment:
    """Export, check, quantise, score and time the sentence-transformers successor in ``successor_dir``; the
    ``deployment`` block. Scored on ``pairs`` (without them, checked on a few example sentences, with no score);
    OpenVINO's int8 model calibrated on the first ``settings.calibration_rows`` of ``training_sentences`` (none: no
    OpenVINO int8).

    An fp32 graph whose sentence vectors differ from PyTorch's by more than :data:`TOLERANCE` is refused and the
    exported folders removed, so nothing unchecked is left to ship.
    """
    started = time.perf_counter()
    require_onnxruntime()
    check_embedding_settings(settings)
    successor = load_embedding_model(successor_dir)
    threads = settings.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    sentences = pairs.sentences if pairs else list(EXAMPLE_SENTENCES)
    files = onnx_files(successor_dir, settings.quantize)
    ir_files = planned_ir_files(successor_dir, settings, bool(training_sentences))
    exported_dirs = cleared_export_folders(successor_dir)
    log.info("Exporting the successor's encoder to %s", files["onnx_fp32"])
    example = _tokens(successor, sentences[:2], EXPORT_LENGTH)
    export_onnx(embedding_encoder(successor), example, files["onnx_fp32"], TOKEN_VECTORS)
    cpu = this_cpu()
    calibration = functools.partial(_calibration, successor, training_sentences[: settings.calibration_rows])
    calibrated = export_openvino(files["onnx_fp32"], ir_files, calibration)  # from the unfused graph, as int8
    fusions, quantization = fused_and_quantized(
        files["onnx_fp32"], files.get("onnx_int8"), int8_reduce_range(cpu.flags), example, TOLERANCE / 10,
        TOKEN_VECTORS,
    )  # fmt: skip
    log.info("ONNX Runtime fusions in %s: %s", files["onnx_fp32"].name, fusions or "none (the unfused graph is kept)")
    sessions = {name: inference_session(path, threads) for name, path in files.items()}
    compiled = compiled_models(ir_files, cpu.flags, threads)
    head = sentence_head(successor)
    models: dict[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]] = {
        REFERENCE: functools.partial(_pytorch_vectors, successor),
        **{
            name: functools.partial(_pooled, functools.partial(session_logits, session, output=TOKEN_VECTORS), head)
            for name, session in sessions.items()
        },
        **{
            name: functools.partial(_pooled, functools.partial(openvino_logits, model), head)
            for name, model in compiled.items()
        },
    }

    checked_on = f"{len(sentences)} " + ("STS-B dev sentences" if pairs else "example sentences (no STS pairs)")
    log.info("Checking the exported models against PyTorch on %s", checked_on)
    vectors = _vectors(models, successor, sentences)
    differences = {
        name: float((vectors[name] - vectors[REFERENCE]).abs().max()) for name in CHECKED_EXPORTS if name in vectors
    }
    refused = {name: value for name, value in differences.items() if not value <= TOLERANCE}
    if refused:
        for folder in exported_dirs:
            shutil.rmtree(folder, ignore_errors=True)
        raise DeploymentError(
            "The exported encoder's sentence vectors differ from PyTorch's beyond the tolerance "
            f"{TOLERANCE:g}: {', '.join(f'{name} by up to {value:.2e}' for name, value in refused.items())}; "
            f"{', '.join(str(folder) for folder in sorted(exported_dirs))} removed. The PyTorch successor is kept."
        )
    scores = None
    if pairs:
        half = len(pairs.sentences1)
        scores = {name: pair_spearman(v[:half], v[half:], pairs.scores) for name, v in vectors.items()}

    if predecessor is not None:
        models = {"pytorch_predecessor": functools.partial(_pytorch_vectors, predecessor), **models}
    timers = {name: functools.partial(_call, model) for name, model in models.items()}
    log.info("Timing %s at batch sizes %s on %d threads", ", ".join(timers), list(settings.batch_sizes), threads)
    batch_of = functools.partial(_sized_batch, successor, sentences, settings.sequence_length)
    latency, busy = timed_latency(timers, batch_of, settings.batch_sizes, settings.repeats)
    if settings.own_lengths and pairs:
        log.info("Timing them again on STS-B dev sentences at their own lengths (%s)", OWN_LENGTHS_IN_WORDS)
        tokenizer, timed = successor.tokenizer, sentences[: OWN_LENGTH_BATCHES * max(settings.batch_sizes)]
        rows = [dict(tokenizer(text, truncation=True, max_length=successor.max_seq_length)) for text in timed]
        own = functools.partial(own_length_batches, rows, tokenizer)
        own_latency, own_busy = timed_latency(timers, own, settings.batch_sizes, settings.repeats, OWN_LENGTHS)
        latency, busy = latency | own_latency, busy | own_busy
    sizes = sizes_mb(successor_dir, predecessor_dir, files) | ir_sizes_mb(ir_files, cpu.flags)
    choice = pick_target(settings.target, latency, scores, settings.max_score_drop)
    log.info("Deploy target: %s (%s)", choice.target, choice.reason)
    return onnx_deployment(
        successor_dir, files, quantization, replace(settings, threads=threads), started, cpu, latency, busy, sizes,
        choice, checked_on=checked_on, max_abs_diff=max(differences.values()), dev_score=scores,
        versions=deployment_versions(openvino=bool(ir_files)), fusions=fusions,
        **openvino_fields(successor_dir, ir_files, calibrated),
    )  # fmt: skip


def planned_ir_files(successor_dir: Path, settings: DeploySettings, has_training_sentences: bool) -> dict[str, Path]:
    """The OpenVINO models ``settings`` ask for, named where sentence-transformers looks: none without
    ``openvino``, and no int8 one without training sentences to calibrate it on."""
    if not settings.openvino:
        return {}
    files = openvino_files(successor_dir, settings.quantize, SENTENCE_TRANSFORMERS_IR)
    if not has_training_sentences and "openvino_int8" in files:
        log.warning("No training sentences to calibrate OpenVINO's int8 model on: fp32 only.")
        del files["openvino_int8"]
    return files


def _calibration(model: SentenceModel, sentences: Sequence[str]) -> list[dict[str, torch.Tensor]]:
    """Each calibration sentence its own batch, unpadded, tokenised as ``encode`` does: as a served sentence comes."""
    return [_tokens(model, [sentence], None) for sentence in sentences]


def _sized_batch(
    model: SentenceModel, sentences: Sequence[str], length: int | None, size: int
) -> list[dict[str, torch.Tensor]]:
    """The one batch a padded latency row is timed on: the first ``size`` sentences (repeated when there are fewer),
    tokenised as :func:`_tokens` does."""
    return [_tokens(model, [sentences[i % len(sentences)] for i in range(size)], length)]


def _tokens(model: SentenceModel, sentences: Sequence[str], length: int | None) -> dict[str, torch.Tensor]:
    """``sentences`` tokenised as ``encode`` does (cut at the model's ``max_seq_length``), padded to their longest,
    or cut and padded to ``length`` tokens."""
    if length is None:
        return dict(model.preprocess(list(sentences)))
    padding = {"padding": "max_length", "truncation": True, "max_length": length}
    return dict(model.tokenizer(list(sentences), return_tensors="pt", **padding))


def _pytorch_vectors(model: SentenceModel, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    with torch.inference_mode():
        return model(dict(batch))["sentence_embedding"]  # a copy: the modules add their outputs to the dict


def _pooled(
    token_vectors: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
    head: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
) -> torch.Tensor:
    """An exported encoder's sentence vectors: its token vectors for ``batch`` through the folder's own ``head``."""
    tokens = token_vectors(batch)
    with torch.inference_mode():
        return sentence_output(head, tokens, batch["attention_mask"], None).logits


def _vectors(
    models: Mapping[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]],
    tokenizing: SentenceModel,
    sentences: Sequence[str],
) -> dict[str, torch.Tensor]:
    """Every model's sentence vectors for ``sentences``, in batches of :data:`CHECK_BATCH` at their own lengths."""
    batches = [_tokens(tokenizing, sentences[i : i + CHECK_BATCH], None) for i in range(0, len(sentences), CHECK_BATCH)]
    return {name: torch.cat([model(batch) for batch in batches]).float() for name, model in models.items()}


def _call(
    model: Callable[[Mapping[str, torch.Tensor]], object], batch: Mapping[str, torch.Tensor]
) -> Callable[[], object]:
    return lambda: model(batch)
