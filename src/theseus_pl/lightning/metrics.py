"""GLUE metrics on torchmetrics, as in the paper (§4.1).

CoLA: Matthews correlation. SST-2, QNLI, RTE, WNLI: accuracy. MRPC, QQP: F1 and accuracy, and their mean.
STS-B: Pearson and Spearman, and their mean. MNLI: accuracy on matched and mismatched dev sets, and their mean.
Each evaluation set's headline is the mean of its components; ``score`` is the mean over evaluation sets, times 100
as in the paper's tables. Checkpointing and early stopping monitor ``val/score``.

Degenerate cases follow GLUE's reference (scikit-learn, SciPy), not torchmetrics: Matthews correlation is 0 when
either the labels or the predictions hold one class (torchmetrics gives about +-0.18 there), and Spearman
correlation is NaN for a constant input, as SciPy's (torchmetrics gives 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix, MulticlassF1Score
from torchmetrics.regression import PearsonCorrCoef, SpearmanCorrCoef
from torchmetrics.utilities import dim_zero_cat

from theseus_pl.data.tasks import METRICS, TaskSpec


class MatthewsCorrCoef(MulticlassConfusionMatrix):
    """Matthews correlation from the confusion matrix, with scikit-learn's rule: 0 when it is undefined."""

    def compute(self) -> torch.Tensor:
        matrix = super().compute().double()
        samples, correct = matrix.sum(), matrix.trace()
        true_counts, predicted_counts = matrix.sum(1), matrix.sum(0)
        covariance = correct * samples - true_counts @ predicted_counts
        spread = (samples**2 - predicted_counts @ predicted_counts) * (samples**2 - true_counts @ true_counts)
        return covariance / spread.sqrt() if spread > 0 else torch.zeros((), dtype=torch.float64)


class SpearmanCorrelation(SpearmanCorrCoef):
    """Spearman correlation, NaN when predictions or labels are constant (SciPy's ``spearmanr``)."""

    def compute(self) -> torch.Tensor:
        predictions, labels = dim_zero_cat(self.preds), dim_zero_cat(self.target)
        if predictions.unique().numel() < 2 or labels.unique().numel() < 2:
            return torch.tensor(float("nan"))
        return super().compute()


def _components(metric: str, num_labels: int) -> dict[str, Metric]:
    if metric == "matthews":
        return {"matthews_corr": MatthewsCorrCoef(num_classes=num_labels)}
    if metric == "accuracy":
        return {"accuracy": MulticlassAccuracy(num_classes=num_labels, average="micro")}
    if metric == "f1_accuracy":
        # Binary tasks report F1 of the positive class (MRPC, QQP); more classes, the macro average.
        f1 = (
            MulticlassF1Score(num_classes=2, average="none")
            if num_labels == 2
            else MulticlassF1Score(num_classes=num_labels, average="macro")
        )
        return {"f1": f1, "accuracy": MulticlassAccuracy(num_classes=num_labels, average="micro")}
    if metric == "pearson_spearman":
        return {"pearson": PearsonCorrCoef(), "spearman": SpearmanCorrelation()}
    raise ValueError(f"Unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")


class TaskMetrics(nn.Module):
    """The task's metrics for each of its evaluation sets (MNLI has two: matched ``m`` and mismatched ``mm``)."""

    headline = "score"  # logged as val/score, in the progress bar; checkpoints keep its maximum

    def __init__(self, metric: str, num_labels: int, eval_names: Sequence[str] = ("",)) -> None:
        super().__init__()
        self.eval_names = list(eval_names)
        self.regression = metric == "pearson_spearman"
        self.sets = nn.ModuleList(nn.ModuleDict(_components(metric, num_labels)) for _ in self.eval_names)

    @classmethod
    def for_task(cls, task: TaskSpec) -> TaskMetrics:
        names = ["m", "mm"] if len(task.eval_splits) == 2 else [""]
        return cls(task.metric, task.num_labels, names)

    @property
    def logged(self) -> tuple[str, ...]:
        """The names :meth:`compute` gives, known before any batch: what a callback may monitor (``val/<name>``)."""
        names = []
        for name, components in zip(self.eval_names, self.sets, strict=True):
            suffix = f"_{name}" if name else ""
            names += [f"{key}{suffix}" for key in components] + ([f"mean{suffix}"] if len(components) > 1 else [])
        return (*names, "score")

    def update(self, logits: torch.Tensor, labels: torch.Tensor, eval_index: int = 0) -> None:
        predictions = logits.squeeze(-1).float() if self.regression else logits.argmax(-1)
        for metric in self.sets[eval_index].values():
            metric.update(predictions, labels)

    def compute(self) -> dict[str, float]:
        """Every component under its name (suffixed ``_m``/``_mm`` for MNLI), and ``score`` times 100."""
        values: dict[str, float] = {}
        headlines = []
        for name, components in zip(self.eval_names, self.sets, strict=True):
            computed = {key: _scalar(metric.compute()) for key, metric in components.items()}
            suffix = f"_{name}" if name else ""
            values.update({f"{key}{suffix}": value for key, value in computed.items()})
            headline = sum(computed.values()) / len(computed)
            if len(computed) > 1:
                values[f"mean{suffix}"] = headline
            headlines.append(headline)
        values["score"] = 100.0 * sum(headlines) / len(headlines)
        return values

    def reset(self) -> None:
        for components in self.sets:
            for metric in components.values():
                metric.reset()


def _scalar(value: torch.Tensor) -> float:
    """F1 with ``average="none"`` gives one value per class; binary tasks report the positive class."""
    return float(value[-1] if value.dim() else value)
