"""Every GLUE metric agrees with an independent computation (scikit-learn, SciPy) on fixed predictions."""

import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from theseus_pl.data.tasks import glue_task
from theseus_pl.metrics import TaskMetrics

LABELS = torch.tensor([0, 1, 1, 0, 1, 1, 0, 0, 1, 1])
PREDICTED = torch.tensor([0, 1, 0, 0, 1, 1, 1, 0, 1, 0])


def one_hot_logits(predicted: torch.Tensor, classes: int = 2) -> torch.Tensor:
    return torch.nn.functional.one_hot(predicted, classes).float() * 3 - 1


def compute(task: str, *sets: tuple[torch.Tensor, torch.Tensor]) -> dict[str, float]:
    metrics = TaskMetrics.for_task(glue_task(task))
    for index, (logits, labels) in enumerate(sets):
        half = len(labels) // 2  # two batches, as an epoch would feed them
        metrics.update(logits[:half], labels[:half], index)
        metrics.update(logits[half:], labels[half:], index)
    return metrics.compute()


def test_cola_is_matthews_correlation():
    values = compute("CoLA", (one_hot_logits(PREDICTED), LABELS))
    expected = matthews_corrcoef(LABELS, PREDICTED)
    assert values["matthews_corr"] == pytest.approx(expected, abs=1e-6)
    assert values["score"] == pytest.approx(100 * expected, abs=1e-4)


@pytest.mark.parametrize("task", ["SST-2", "QNLI", "RTE", "WNLI"])
def test_accuracy_tasks(task):
    values = compute(task, (one_hot_logits(PREDICTED), LABELS))
    assert values == pytest.approx({"accuracy": accuracy_score(LABELS, PREDICTED), "score": 70.0})


@pytest.mark.parametrize("task", ["MRPC", "QQP"])
def test_f1_and_accuracy_and_their_mean(task):
    values = compute(task, (one_hot_logits(PREDICTED), LABELS))
    f1, accuracy = f1_score(LABELS, PREDICTED), accuracy_score(LABELS, PREDICTED)
    assert values == pytest.approx(
        {"f1": f1, "accuracy": accuracy, "mean": (f1 + accuracy) / 2, "score": 50 * (f1 + accuracy)}
    )


def test_stsb_is_pearson_and_spearman_and_their_mean():
    labels = torch.tensor([0.0, 1.2, 2.5, 3.1, 4.8, 5.0, 2.2, 0.4])
    scores = torch.tensor([0.3, 1.0, 2.9, 2.7, 4.1, 4.9, 1.5, 1.1])
    values = compute("STS-B", (scores.unsqueeze(-1), labels))
    pearson, spearman = pearsonr(scores, labels).statistic, spearmanr(scores, labels).statistic
    assert values == pytest.approx(
        {
            "pearson": pearson,
            "spearman": spearman,
            "mean": (pearson + spearman) / 2,
            "score": 50 * (pearson + spearman),
        },
        abs=1e-5,
    )


def test_mnli_reports_matched_mismatched_and_their_mean():
    labels_m, predicted_m = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 2, 0])
    labels_mm, predicted_mm = torch.tensor([2, 1, 0, 0, 1]), torch.tensor([2, 0, 0, 1, 1])
    values = compute("MNLI", (one_hot_logits(predicted_m, 3), labels_m), (one_hot_logits(predicted_mm, 3), labels_mm))
    assert values == pytest.approx({"accuracy_m": 0.75, "accuracy_mm": 0.6, "score": 67.5})


def test_reset_starts_a_new_epoch():
    metrics = TaskMetrics.for_task(glue_task("RTE"))
    metrics.update(one_hot_logits(PREDICTED), LABELS)
    metrics.reset()
    metrics.update(one_hot_logits(LABELS), LABELS)
    assert metrics.compute()["score"] == 100.0
