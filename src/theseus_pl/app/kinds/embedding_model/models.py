"""A sentence-embedding model as methods build on it (:class:`~theseus_pl.app.methods.kind_models.KindModels`)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from transformers import PreTrainedModel

from theseus_pl.app.methods.kind_models import KindModels
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import keep_layers
from theseus_pl.core.replacing import TheseusModel, successor_source_layers
from theseus_pl.core.sentence_objective import SentenceObjective, TheseusSentenceModel
from theseus_pl.core.successors import SuccessorFactory
from theseus_pl.lightning.embedding_metrics import EmbeddingMetrics, PairScoreMetrics


def sentence_metrics(pairs: bool) -> type[EmbeddingMetrics] | type[PairScoreMetrics]:
    """What scores a sentence-embedding model: fidelity to the teacher's vectors, or with ``pairs`` the held-out
    labelled pairs' Spearman."""
    return PairScoreMetrics if pairs else EmbeddingMetrics


@dataclass(frozen=True)
class SentenceModels(KindModels):
    """A sentence-embedding model's: its encoder, with the predecessor's modules after it (``head``: the pooling, a
    normalisation) giving the sentence vectors; the loss the MSE to the predecessor's vectors, or with ``pairs``
    CoSENT on labelled pairs. Its truncation trains every parameter of the kept layers (sentence-transformers'
    recipe)."""

    head: nn.Module
    pairs: bool = False

    def metrics(self) -> EmbeddingMetrics | PairScoreMetrics:
        return sentence_metrics(self.pairs)()

    def predecessor(self, directory: str) -> PreTrainedModel:
        from theseus_pl.core.embeddings import embedding_encoder, load_embedding_model  # the embeddings extra

        return embedding_encoder(load_embedding_model(directory))

    def replaceable(
        self,
        predecessor: PreTrainedModel,
        successor_layers: int,
        sources: str | list[int],
        layers_path: str | None,
        factory: SuccessorFactory,
    ) -> TheseusModel:
        return TheseusSentenceModel(predecessor, self.head, successor_layers, sources, layers_path, factory)

    def truncated(
        self, predecessor: PreTrainedModel, successor_layers: int, init: str, layers_path: str | None
    ) -> nn.Module:
        count = len(find_layer_stack(predecessor, layers_path).layers)
        kept = successor_source_layers(count, successor_layers, init)
        return SentenceObjective(keep_layers(predecessor, kept, layers_path), self.head)
