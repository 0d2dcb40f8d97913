"""Every GLUE metric agrees with an independent computation (scikit-learn, SciPy) on fixed predictions, and every
metric names before any batch the values it computes."""

import warnings

import pytest
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from theseus_pl.data.tasks import glue_task
from theseus_pl.lightning.embedding_metrics import EmbeddingMetrics, PairScoreMetrics
from theseus_pl.lightning.metrics import TaskMetrics

pytestmark = pytest.mark.quick

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


@pytest.mark.parametrize("task", ["CoLA", "RTE", "MRPC", "STS-B", "MNLI"])
def test_the_names_known_before_any_batch_are_those_computed(task):
    """A callback's ``monitor`` is checked against them before the run starts: they must be what validation logs."""
    spec = glue_task(task)
    sets = [(torch.randn(6, max(spec.num_labels, 1)), torch.tensor([0, 1, 0, 1, 0, 1])) for _ in spec.eval_splits]
    if spec.is_regression:
        sets = [(logits, labels.float()) for logits, labels in sets]
    assert TaskMetrics.for_task(spec).logged == tuple(compute(task, *sets))


@pytest.mark.parametrize("metric_class", [EmbeddingMetrics, PairScoreMetrics])
def test_a_sentence_embedding_metric_names_the_values_it_computes(metric_class):
    metric = metric_class()
    vectors = torch.randn(6, 4)
    metric.update(vectors, torch.randn(6, 4) if metric_class is EmbeddingMetrics else torch.tensor([1.0, 4.0, 2.0]))
    assert metric_class.logged == tuple(metric.compute())


def test_reset_starts_a_new_epoch():
    metrics = TaskMetrics.for_task(glue_task("RTE"))
    metrics.update(one_hot_logits(PREDICTED), LABELS)
    metrics.reset()
    metrics.update(one_hot_logits(LABELS), LABELS)
    assert metrics.compute()["score"] == 100.0


# Degenerate predictions and labels, where libraries disagree: GLUE's reference is scikit-learn and SciPy.
LABELLED = torch.tensor([0, 1, 1, 0, 1, 1, 0, 0, 1, 1])
DEGENERATE = {
    "constant 0": (LABELLED, torch.zeros(10, dtype=torch.long)),
    "constant 1": (LABELLED, torch.ones(10, dtype=torch.long)),
    "one-class labels": (torch.ones(10, dtype=torch.long), LABELLED),
    "one class everywhere": (torch.ones(10, dtype=torch.long), torch.ones(10, dtype=torch.long)),
    "perfect": (LABELLED, LABELLED),
    "inverted": (LABELLED, 1 - LABELLED),
}


def glue_reference(metric: str, labels: torch.Tensor, predicted: torch.Tensor) -> float:
    """The task's headline x100 as GLUE computes it."""
    if metric == "matthews":
        return 100 * matthews_corrcoef(labels, predicted)
    if metric == "accuracy":
        return 100 * accuracy_score(labels, predicted)
    return 50 * (f1_score(labels, predicted, zero_division=0) + accuracy_score(labels, predicted))


@pytest.mark.parametrize("case", DEGENERATE)
@pytest.mark.parametrize("task", ["CoLA", "SST-2", "QNLI", "RTE", "WNLI", "MRPC", "QQP"])
def test_classification_scores_equal_glue_reference_in_degenerate_cases(task, case):
    labels, predicted = DEGENERATE[case]
    score = compute(task, (one_hot_logits(predicted), labels))["score"]
    assert score == pytest.approx(glue_reference(glue_task(task).metric, labels, predicted), abs=1e-4)


@pytest.mark.parametrize("case", DEGENERATE)
def test_mnli_equals_glue_reference_in_degenerate_cases(case):
    labels, predicted = DEGENERATE[case]
    three_class = (labels * 2, predicted * 2)  # entailment / contradiction only: class 1 never occurs
    sets = (one_hot_logits(three_class[1], 3), three_class[0]), (one_hot_logits(predicted, 3), labels)
    score = compute("MNLI", *sets)["score"]
    expected = 50 * (accuracy_score(*three_class) + accuracy_score(labels, predicted))
    assert score == pytest.approx(expected)


def test_cola_constant_predictions_score_zero_not_torchmetrics_epsilon():
    # A predecessor that always predicts "acceptable" scored -11.11 here before (torchmetrics' MCC).
    labels = torch.tensor([1] * 45 + [0] * 19)
    assert compute("CoLA", (one_hot_logits(torch.ones(64, dtype=torch.long)), labels))["score"] == 0.0


STSB_LABELS = torch.tensor([0.0, 1.2, 2.5, 3.1, 4.8, 5.0, 2.2, 0.4])
STSB_DEGENERATE = {
    "constant predictions": (STSB_LABELS, torch.full((8,), 2.5)),
    "constant labels": (torch.full((8,), 3.0), STSB_LABELS),
    "perfect": (STSB_LABELS, STSB_LABELS),
    "inverted": (STSB_LABELS, -STSB_LABELS),
}


@pytest.mark.parametrize("case", STSB_DEGENERATE)
def test_stsb_equals_scipy_in_degenerate_cases(case):
    labels, scores = STSB_DEGENERATE[case]
    values = compute("STS-B", (scores.unsqueeze(-1), labels))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns that a constant input has no correlation
        expected = {"pearson": pearsonr(scores, labels).statistic, "spearman": spearmanr(scores, labels).statistic}
    for name, value in expected.items():
        assert values[name] == pytest.approx(value, abs=1e-5, nan_ok=True), name
