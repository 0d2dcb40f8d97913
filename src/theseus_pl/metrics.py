"""GLUE metrics on torchmetrics, as in the paper (§4.1).

CoLA: Matthews correlation. SST-2, QNLI, RTE, WNLI: accuracy. MRPC, QQP: F1 and accuracy, and their mean.
STS-B: Pearson and Spearman, and their mean. MNLI: accuracy on matched and mismatched dev sets, and their mean.
Each evaluation set's headline is the mean of its components; ``score`` is the mean over evaluation sets, times 100
as in the paper's tables. Checkpointing and early stopping monitor ``val/score``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy, MulticlassF1Score, MulticlassMatthewsCorrCoef
from torchmetrics.regression import PearsonCorrCoef, SpearmanCorrCoef

from theseus_pl.data.tasks import METRICS, TaskSpec


def _components(metric: str, num_labels: int) -> dict[str, Metric]:
    if metric == "matthews":
        return {"matthews_corr": MulticlassMatthewsCorrCoef(num_classes=num_labels)}
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
        return {"pearson": PearsonCorrCoef(), "spearman": SpearmanCorrCoef()}
    raise ValueError(f"Unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")


class TaskMetrics(nn.Module):
    """The task's metrics for each of its evaluation sets (MNLI has two: matched ``m`` and mismatched ``mm``)."""

    def __init__(self, metric: str, num_labels: int, eval_names: Sequence[str] = ("",)) -> None:
        super().__init__()
        self.eval_names = list(eval_names)
        self.regression = metric == "pearson_spearman"
        self.sets = nn.ModuleList(nn.ModuleDict(_components(metric, num_labels)) for _ in self.eval_names)

    @classmethod
    def for_task(cls, task: TaskSpec) -> TaskMetrics:
        names = ["m", "mm"] if len(task.eval_splits) == 2 else [""]
        return cls(task.metric, task.num_labels, names)

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
