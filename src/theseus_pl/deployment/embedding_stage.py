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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from theseus_pl.core.embeddings import embedding_encoder, load_embedding_model, pair_spearman, sentence_head
from theseus_pl.core.precision import this_cpu
from theseus_pl.core.sentence_objective import sentence_output
from theseus_pl.deployment.onnx_deployment import Checked, ExportedModel, Timer, deployed, own_length_batches
from theseus_pl.deployment.onnx_export import (
    TOKEN_VECTORS,
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
from theseus_pl.deployment.stage import EXAMPLE_SENTENCES, EXPORT_LENGTH
from theseus_pl.deployment.targets import (
    AUTO,
    CHECKED_EXPORTS,
    OWN_LENGTH_BATCHES,
    REFERENCE,
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
    """Export, check, quantise, score and time the sentence-transformers successor in ``successor_dir``
    (:func:`~theseus_pl.deployment.stage.deployed`); the ``deployment`` block. Scored on ``pairs`` (without them,
    checked on a few example sentences, with no score); OpenVINO's int8 model calibrated on the first
    ``settings.calibration_rows`` of ``training_sentences`` (none: no OpenVINO int8)."""
    started = time.perf_counter()
    require_onnxruntime()
    check_embedding_settings(settings)
    part = ExportedEncoder(successor_dir, settings, pairs, predecessor, training_sentences)
    return deployed(part, successor_dir, settings, predecessor_dir, started)


class ExportedEncoder(ExportedModel):
    """A sentence-transformers model: its encoder exported (its token vectors), every check running them through the
    folder's own pooling and normalisation; scored by the STS Spearman of its sentence vectors."""

    exported, output = "the successor's encoder", TOKEN_VECTORS
    ir_names = SENTENCE_TRANSFORMERS_IR
    compared = "The exported encoder's sentence vectors"

    def __init__(
        self,
        successor_dir: Path,
        settings: DeploySettings,
        pairs: StsPairs | None,
        predecessor: SentenceModel | None,
        training_sentences: Sequence[str],
    ) -> None:
        self.successor = load_embedding_model(successor_dir)
        self.pairs, self.predecessor, self.training_sentences = pairs, predecessor, training_sentences
        self.sentences = pairs.sentences if pairs else list(EXAMPLE_SENTENCES)
        self.checking = f"{len(self.sentences)} " + (
            "STS-B dev sentences" if pairs else "example sentences (no STS pairs)"
        )
        self.own_rows = "STS-B dev sentences" if pairs else None
        self.cpu = this_cpu()
        self.timed_sentences = self.sentences[: OWN_LENGTH_BATCHES * max(settings.batch_sizes)]

    def module(self) -> torch.nn.Module:
        return embedding_encoder(self.successor)

    def example(self) -> dict[str, torch.Tensor]:
        return _tokens(self.successor, self.sentences[:2], EXPORT_LENGTH)

    def ir_files(self, successor_dir: Path, settings: DeploySettings) -> dict[str, Path]:
        return planned_ir_files(successor_dir, settings, bool(self.training_sentences))

    def calibration(self, count: int) -> list[dict[str, torch.Tensor]]:
        return _calibration(self.successor, self.training_sentences[:count])

    def _models(
        self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]
    ) -> dict[str, Callable[[Mapping[str, torch.Tensor]], torch.Tensor]]:
        """Each model's sentence vectors for a batch: PyTorch's, and each export's token vectors pooled."""
        head = sentence_head(self.successor)
        return {
            REFERENCE: functools.partial(_pytorch_vectors, self.successor),
            **{
                name: functools.partial(_pooled, functools.partial(session_logits, session, output=TOKEN_VECTORS), head)
                for name, session in sessions.items()
            },
            **{
                name: functools.partial(_pooled, functools.partial(openvino_logits, model), head)
                for name, model in compiled.items()
            },
        }

    def check(self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]) -> Checked:
        vectors = _vectors(self._models(sessions, compiled), self.successor, self.sentences)
        differences = {
            name: float((vectors[name] - vectors[REFERENCE]).abs().max()) for name in CHECKED_EXPORTS if name in vectors
        }
        scores = None
        if self.pairs:
            half, gold = len(self.pairs.sentences1), self.pairs.scores
            scores = {name: pair_spearman(v[:half], v[half:], gold) for name, v in vectors.items()}
        return Checked(differences, scores, self.checking)

    def timers(self, sessions: Mapping[str, Any], compiled: Mapping[str, Any]) -> dict[str, Timer]:
        models = self._models(sessions, compiled)
        if self.predecessor is not None:
            models = {"pytorch_predecessor": functools.partial(_pytorch_vectors, self.predecessor), **models}
        return {name: functools.partial(_call, model) for name, model in models.items()}

    def padded_batches(self, length: int | None, size: int) -> list[dict[str, torch.Tensor]]:
        return _sized_batch(self.successor, self.sentences, length, size)

    def own_length_batches(self, size: int) -> list[dict[str, torch.Tensor]]:
        tokenizer, limit = self.successor.tokenizer, self.successor.max_seq_length
        rows = [dict(tokenizer(text, truncation=True, max_length=limit)) for text in self.timed_sentences]
        return own_length_batches(rows, tokenizer, size)


def planned_ir_files(successor_dir: Path, settings: DeploySettings, has_training_sentences: bool) -> dict[str, Path]:
    """The OpenVINO models ``settings`` ask for, named where sentence-transformers looks: none without
    ``openvino``, and no int8 one without training sentences to calibrate it on."""
    if not settings.openvino:
        return {}
    files = openvino_files(successor_dir, settings.quantize, ExportedEncoder.ir_names)
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
