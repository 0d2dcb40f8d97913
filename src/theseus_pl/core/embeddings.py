"""Sentence-embedding models (sentence-transformers) as predecessors and successors: loading, the encoder inside, a
shallower copy that sentence-transformers itself loads, and the two measures a successor is judged by.

A sentence-transformers model is a list of modules: a ``Transformer`` (a transformers encoder and its tokenizer), then
``Pooling`` (token vectors to one sentence vector), often ``Normalize``. Compression only touches the encoder's layer
list, so a successor keeps every module after the first as the predecessor had it: the same pooling mode, the same
normalisation, hence vectors of the same size and kind, and ``SentenceTransformer(path)`` loads the saved successor
with no code of ours.

Which layers to keep (bottom, every other) is :func:`theseus_pl.core.replacing.successor_source_layers`; the copy
with fewer layers is :func:`theseus_pl.core.layer_removal.keep_layers`. This module reuses both.

Quality is sentence-transformers' own: STS as its ``EmbeddingSimilarityEvaluator`` computes it (Spearman of the
cosine similarities), so figures compare with those the sentence-transformers documentation and model cards report.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.core.layer_removal import keep_layers
from theseus_pl.core.timing import interleaved_seconds

INSTALL = "pip install 'theseus_pl[embeddings]'"

try:  # an extra: the rest of the core runs without it
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from sentence_transformers.util import load_file_path, pairwise_cos_sim
except ModuleNotFoundError as missing:
    if missing.name != "sentence_transformers":
        raise
    raise ModuleNotFoundError(
        f"Sentence-embedding models need sentence-transformers, not installed here: {INSTALL}.",
        name=missing.name,
    ) from missing

_HOW_TO_POOL = (
    "give a sentence-transformers folder, or add pooling: SentenceTransformer(modules=[Transformer(folder), "
    "Pooling(hidden_size, 'mean')]).save(new_folder)"
)


def load_embedding_model(path_or_id: str | Path) -> SentenceTransformer:
    """The sentence-transformers model at ``path_or_id`` (a folder, or a hub name when online), on the CPU, in eval
    mode.

    Refused (one line: the folder, what it lacks, the fix) where it is no sentence-transformers model, because
    ``SentenceTransformer`` would otherwise load a plain transformers folder anyway, silently adding mean pooling: the
    predecessor measured would not be the one the user has. A model without a ``Pooling`` module is refused too: its
    sentence vectors come from modules the successor's shallower encoder may not fit.
    """
    name = str(path_or_id)
    if load_file_path(name, "modules.json") is None:  # a local file, else the hub (HF_HUB_OFFLINE: its cache)
        if not Path(name).is_dir():
            raise ValueError(
                f"path_or_id={name!r} is no folder here, and the hub (offline: its cache) has no modules.json for it; "
                "give the folder of a sentence-transformers model, or its hub name when online."
            )
        raise ValueError(
            f"path_or_id={name!r} is no sentence-transformers model: it has no modules.json (a plain transformers "
            f"folder has none); {_HOW_TO_POOL}."
        )
    model = SentenceTransformer(name, device="cpu")
    if not any(isinstance(module, Pooling) for module in model):
        found = ", ".join(type(module).__name__ for module in model)
        raise ValueError(
            f"path_or_id={name!r} is no sentence-transformers model this library compresses: its modules.json lists "
            f"no Pooling module (it lists {found}); {_HOW_TO_POOL}."
        )
    return model.eval()


def embedding_encoder(model: SentenceTransformer) -> PreTrainedModel:
    """The transformers model inside ``model`` (its first module's ``auto_model``): the one whose layers Theseus
    replaces and truncation removes. Refused where the first module is no ``Transformer`` (static embeddings, CLIP, a
    router): such a model has no layer list to compress."""
    first = model[0]
    if not isinstance(first, Transformer):
        raise ValueError(
            f"model: its first module is {type(first).__name__}, not a sentence-transformers Transformer, so it has no "
            "transformers encoder whose layers could be kept; give a model whose first module is a Transformer."
        )
    return first.auto_model


def truncated_embedding_model(
    model: SentenceTransformer, kept: Sequence[int], layers_path: str | None = None
) -> SentenceTransformer:
    """A copy of ``model`` whose encoder keeps only the layers ``kept`` (ascending indices; its config says the new
    depth), every other module (pooling, normalisation, dense heads) copied as it is.

    The predecessor is not changed, and its encoder is copied once: the deep copy of ``model`` takes the already
    truncated encoder in place of the original. ``model.save(path)`` of the result loads with
    ``SentenceTransformer(path)``. ``layers_path`` names the encoder's layer list where its family is not registered
    (see :func:`theseus_pl.core.families.find_layer_stack`).
    """
    return with_encoder(model, keep_layers(embedding_encoder(model), kept, layers_path))


def with_encoder(model: SentenceTransformer, encoder: PreTrainedModel) -> SentenceTransformer:
    """A copy of ``model`` with ``encoder`` (a compressed one: truncated, or a Theseus successor) in place of its own,
    every other module copied as it is: the predecessor's pooling and normalisation, its tokenizer. The config the
    encoder carries says its depth; the predecessor is not changed, and its own encoder is not copied."""
    return copy.deepcopy(model, memo={id(embedding_encoder(model)): encoder})


def sentence_head(model: SentenceTransformer) -> nn.Sequential:
    """The modules after the encoder (pooling, normalisation, dense layers), in order: what turns its token vectors
    into the sentence vectors ``encode`` returns, a successor's as the predecessor's."""
    embedding_encoder(model)  # refused where the first module is no Transformer
    return nn.Sequential(*list(model)[1:])


def sts_spearman(
    model: SentenceTransformer,
    sentences1: Sequence[str],
    sentences2: Sequence[str],
    scores: Sequence[float],
    batch_size: int = 32,
) -> float:
    """The STS score of ``model`` on the pairs (``sentences1[i]``, ``sentences2[i]``) with gold ``scores``: the
    Spearman correlation of the pairs' cosine similarities with the scores, times 100, as papers and model cards
    report it.

    Computed by sentence-transformers' own ``EmbeddingSimilarityEvaluator`` (its ``spearman_cosine``, a fraction in
    [-1, 1]), so the figure is the one its users know. The evaluator also records the result in
    ``model.model_card_data``, as it does in training: a saved model's card then shows it.
    """
    if not len(sentences1) == len(sentences2) == len(scores):
        raise ValueError(
            f"sentences1, sentences2 and scores must be of one length (got {len(sentences1)}, {len(sentences2)}, "
            f"{len(scores)}): one score per pair."
        )
    evaluator = EmbeddingSimilarityEvaluator(
        list(sentences1),
        list(sentences2),
        [float(score) for score in scores],
        batch_size=batch_size,
        main_similarity="cosine",
        write_csv=False,
    )
    results = evaluator(model)
    return 100 * float(results[evaluator.primary_metric])


def pair_spearman(vectors1: torch.Tensor, vectors2: torch.Tensor, scores: Sequence[float]) -> float:
    """:func:`sts_spearman` from sentence vectors computed elsewhere (an exported model's): the Spearman correlation
    of each pair's cosine similarity with its gold score, times 100, as ``EmbeddingSimilarityEvaluator`` computes it
    (sentence-transformers' ``pairwise_cos_sim``, SciPy's ``spearmanr``)."""
    from scipy.stats import spearmanr

    cosines = pairwise_cos_sim(vectors1.float(), vectors2.float()).numpy()
    return 100 * float(spearmanr([float(score) for score in scores], cosines).statistic)


def fidelity(
    student: SentenceTransformer, teacher: SentenceTransformer, sentences: Sequence[str], batch_size: int = 32
) -> dict[str, float]:
    """How closely ``student`` reproduces ``teacher``'s sentence vectors on ``sentences`` (held out from any
    training): ``mse``, the mean over sentences and dimensions of the squared difference (what sentence-transformers'
    distillation minimises; its ``MSEEvaluator`` reports it times 100), and ``cosine``, the mean over sentences of the
    two vectors' cosine similarity (1: same direction; what a cosine search sees).

    Refused where the two vectors differ in size: a successor keeps its predecessor's pooling, so they should not.
    """
    dimensions = student.get_embedding_dimension(), teacher.get_embedding_dimension()
    if dimensions[0] != dimensions[1]:
        raise ValueError(
            f"student and teacher embed in {dimensions[0]} and {dimensions[1]} dimensions: their vectors cannot be "
            "compared; give a student that keeps the teacher's modules after the encoder (truncated_embedding_model)."
        )
    if not sentences:
        raise ValueError("sentences is empty: give the held-out sentences to compare the two models on.")
    texts = list(sentences)
    vectors = [
        model.encode(texts, batch_size=batch_size, convert_to_tensor=True, show_progress_bar=False).float().cpu()
        for model in (student, teacher)
    ]
    return {
        "mse": float(F.mse_loss(vectors[0], vectors[1])),
        "cosine": float(F.cosine_similarity(vectors[0], vectors[1], dim=-1).mean()),
    }


def sentence_speed(
    predecessor: SentenceTransformer,
    successor: SentenceTransformer,
    sentences: Sequence[str],
    batch_size: int = 32,
    repeats: int = 5,
) -> dict[str, float]:
    """Sentences per second of both models through ``encode``, as users call it, at real lengths: ``batch_size``
    sentences in one call (sentence-transformers sorts them by length and pads to the longest) and the first 16 one at
    a time (batch 1: no padding at all), each the median of ``repeats`` interleaved rounds
    (:func:`~theseus_pl.core.timing.interleaved_seconds`); the successor's speed-ups, and ``other_cores`` (above
    0.25 the figures are not the models')."""
    singles, batch = list(sentences[:16]), list(sentences[:batch_size])

    def one_at_a_time(model: SentenceTransformer) -> Callable[[], object]:
        return lambda: [model.encode([text], batch_size=1, show_progress_bar=False) for text in singles]

    def batched(model: SentenceTransformer) -> Callable[[], object]:
        return lambda: model.encode(batch, batch_size=batch_size, show_progress_bar=False)

    times = interleaved_seconds({
        "predecessor_batch1": one_at_a_time(predecessor), "successor_batch1": one_at_a_time(successor),
        f"predecessor_batch{batch_size}": batched(predecessor), f"successor_batch{batch_size}": batched(successor),
    }, repeats)  # fmt: skip
    speed: dict[str, float] = {}
    for size, count in ((1, len(singles)), (batch_size, len(batch))):
        rates = {side: count / statistics.median(times[f"{side}_batch{size}"]) for side in ("predecessor", "successor")}
        speed.update({f"{side}_batch{size}": rate for side, rate in rates.items()})
        speed[f"batch{size}_speedup"] = rates["successor"] / rates["predecessor"]
    if times.other_cores is not None:
        speed["other_cores"] = times.other_cores
    return speed
