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
from collections.abc import Sequence
from pathlib import Path

import torch.nn.functional as F
from transformers import PreTrainedModel

from theseus_pl.core.layer_removal import keep_layers

INSTALL = "pip install 'theseus_pl[embeddings]'"

try:  # an extra: the rest of the core runs without it
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from sentence_transformers.util import load_file_path
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
    encoder = embedding_encoder(model)
    compact = keep_layers(encoder, kept, layers_path)
    return copy.deepcopy(model, memo={id(encoder): compact})


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
