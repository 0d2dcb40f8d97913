"""A sentence-embedding model as something that trains: an encoder, the predecessor's pooling (and normalisation)
after it, and the loss of sentence-transformers' distillation recipe, the mean squared error to the teacher's
sentence vectors, or on labelled pairs (``data=sentence_pairs``) its CoSENT loss on the pairs' cosine similarities.

The teacher's vectors come in as ``labels`` (one vector per sentence, computed once by the whole predecessor): the
all-predecessor path of a Theseus model is that same predecessor, so its vectors are the soft targets the paper's
method would compute batch by batch, made once. The output has ``loss`` and ``logits`` (the sentence vectors), as a
Hugging Face model's has, so the same Lightning modules train a sentence-embedding student, a truncated one or a
Theseus one, as they train a classifier.

The head is whatever follows the sentence-transformers ``Transformer`` module (``Pooling``, ``Normalize``, a
``Dense``): called as sentence-transformers calls it, on the features dict, so the vectors are the ones
``SentenceTransformer.encode`` returns. It never trains: a successor keeps its predecessor's pooling.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from theseus_pl.core.replacing import TheseusModel


@dataclass
class SentenceOutput(ModelOutput):
    """The sentence vectors (``logits``, as the Lightning modules call a model's outputs) and, given the teacher's,
    the mean squared error to them (``loss``)."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None


def sentence_output(
    head: nn.Module, token_states: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor | None
) -> SentenceOutput:
    """The head's sentence vectors from the encoder's last hidden states, and the loss where ``labels`` are given:
    the teacher's vectors (one a sentence), then the mean over sentences and dimensions of the squared difference
    (sentence-transformers' ``MSELoss``); or the gold scores of pairs (one per two sentences: the batch's first half
    are the pairs' first sentences, its second half their second ones), then sentence-transformers' ``CoSENTLoss``."""
    features = head({"token_embeddings": token_states, "attention_mask": attention_mask})
    vectors = features["sentence_embedding"]
    if labels is None:
        return SentenceOutput(loss=None, logits=vectors)
    if labels.dim() == 1:
        half = len(vectors) // 2
        loss = _cosent().compute_loss_from_embeddings([vectors[:half].float(), vectors[half:].float()], labels)
        return SentenceOutput(loss=loss, logits=vectors)
    return SentenceOutput(loss=F.mse_loss(vectors.float(), labels.float()), logits=vectors)


@functools.cache
def _cosent() -> nn.Module:
    """sentence-transformers' CoSENT loss, made once rather than every training step (it holds no model state)."""
    from sentence_transformers.sentence_transformer.losses import CoSENTLoss  # the embeddings extra

    return CoSENTLoss(None)


class SentenceObjective(nn.Module):
    """A plain encoder (the truncated student, or the compact successor) with the predecessor's head after it."""

    def __init__(self, encoder: PreTrainedModel, head: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head.requires_grad_(False)

    def forward(self, labels: torch.Tensor | None = None, **inputs: Any) -> SentenceOutput:
        states = self.encoder(**inputs).last_hidden_state
        return sentence_output(self.head, states, inputs["attention_mask"], labels)


class TheseusSentenceModel(TheseusModel):
    """A :class:`~theseus_pl.core.replacing.TheseusModel` of a sentence encoder (a plain ``AutoModel``, no task head),
    whose output is the sentence vectors of the gated model and their distance to the teacher's. The compact
    successor is a :class:`SentenceObjective` with the same head."""

    def __init__(self, predecessor: PreTrainedModel, head: nn.Module, *args: Any, **kwargs: Any) -> None:
        super().__init__(predecessor, *args, **kwargs)
        self.head = head.requires_grad_(False)

    def forward(self, gate: Any = None, labels: torch.Tensor | None = None, **inputs: Any) -> Any:
        output = super().forward(gate, **inputs)
        head = self._modules.get("head")
        if head is None:  # TheseusModel's own shape check runs before the head is attached: the encoder alone
            return output
        return sentence_output(head, output.last_hidden_state, inputs["attention_mask"], labels)

    def to_compact_model(self) -> SentenceObjective:  # type: ignore[override]
        return SentenceObjective(super().to_compact_model(), self.head)

    def export(self, directory: str | Path, tokenizer: Any = None) -> Path:
        """Refused, naming what does it: a sentence-embedding successor ships as a sentence-transformers folder
        (``modules.json``, the pooling's settings, the tokenizer's length), which the sentence-transformers model the
        encoder came from writes, not the encoder and head this model holds."""
        raise NotImplementedError(
            "A sentence-embedding successor is saved as a sentence-transformers folder: "
            "with_encoder(model, theseus.to_compact_model().encoder).save(directory) (theseus_pl.core.embeddings; "
            "model: the SentenceTransformer whose encoder this model compressed)."
        )
