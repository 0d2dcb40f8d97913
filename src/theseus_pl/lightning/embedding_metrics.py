"""Held-out fidelity of a sentence-embedding student to its teacher, what training watches and checkpoints choose on
(:class:`PairScoreMetrics`: on labelled pairs, the held-out pairs' Spearman instead).

On held-out training sentences (never STS-B dev, which scores the finished run), against the teacher's vectors given as
the batch's ``labels``:

- ``cosine``: the mean over sentences of the cosine similarity of the student's vector and the teacher's;
- ``mse``: the mean over sentences and dimensions of their squared difference (the training loss);
- ``score``: ``100 x cosine``, the headline checkpoints keep the maximum of.

Sums are metric states, so DDP ranks add up.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat


class EmbeddingMetrics(Metric):
    """Mean cosine and mean squared error of sentence vectors to the teacher's, over held-out sentences."""

    full_state_update = False
    headline = "score"  # logged as val/score, in the progress bar; checkpoints keep its maximum
    logged = ("score", "cosine", "mse")  # what compute gives: what a callback may monitor (val/<name>)

    def __init__(self) -> None:
        super().__init__()
        for name in ("cosine_sum", "squared_sum", "sentences", "values"):
            self.add_state(name, default=torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, vectors: torch.Tensor, teacher_vectors: torch.Tensor) -> None:
        vectors, teacher_vectors = vectors.float(), teacher_vectors.float()
        self.cosine_sum += F.cosine_similarity(vectors, teacher_vectors, dim=-1).sum().double()
        self.squared_sum += (vectors - teacher_vectors).pow(2).sum().double()
        self.sentences += len(vectors)
        self.values += vectors.numel()

    def compute(self) -> dict[str, float]:
        if self.sentences == 0:
            raise ValueError("No held-out sentence was scored: the held-out sentences are empty.")
        cosine = float(self.cosine_sum / self.sentences)
        return {"score": 100 * cosine, "cosine": cosine, "mse": float(self.squared_sum / self.values)}


class PairScoreMetrics(Metric):
    """On held-out labelled pairs (``data=sentence_pairs``): the Spearman correlation (x100, the ``score``) of each
    pair's cosine similarity with its gold score, as STS-B dev scores the finished run. A batch's vectors are its
    pairs' first sentences then their second ones; ``labels`` the gold scores."""

    full_state_update = False
    headline = "score"
    logged = ("score", "spearman")

    def __init__(self) -> None:
        super().__init__()
        self.add_state("cosines", default=[], dist_reduce_fx="cat")
        self.add_state("scores", default=[], dist_reduce_fx="cat")

    def update(self, vectors: torch.Tensor, scores: torch.Tensor) -> None:
        half = len(vectors) // 2
        self.cosines.append(F.cosine_similarity(vectors[:half].float(), vectors[half:].float(), dim=-1))
        self.scores.append(scores.float())

    def compute(self) -> dict[str, float]:
        from scipy.stats import spearmanr

        if not self.cosines:
            raise ValueError("No held-out pair was scored: the held-out pairs are empty.")
        cosines, scores = dim_zero_cat(self.cosines), dim_zero_cat(self.scores)
        spearman = float(spearmanr(scores.cpu().numpy(), cosines.cpu().numpy()).statistic)
        return {"score": 100 * spearman, "spearman": spearman}
