"""What each task is: text columns, labels, metric, sequence length, and where its files keep them.

One registry for the nine GLUE tasks, plus :func:`custom_task` for a user's own classification or regression
data. Text columns use the Hugging Face hub's names (``nyu-mll/glue``); :class:`TsvLayout` says how the classic
GLUE download spells the same columns.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

METRICS = ("matthews", "accuracy", "f1_accuracy", "pearson_spearman")


@dataclass(frozen=True)
class TsvLayout:
    """The classic GLUE download of one task: ``<glue_dir>/<folder>/<file>.tsv``."""

    folder: str
    files: dict[str, str]  # split -> file name without .tsv
    columns: dict[str, str]  # hub column name (and "label") -> column name in the file
    label_values: tuple[str, ...] = ()  # file value of class 0, 1, …; empty for a float score
    headerless_names: tuple[str, ...] = ()  # column names of train/dev files that have no header row (CoLA)
    index_column: str = "index"  # the id a test file gives each row, echoed in submissions


@dataclass(frozen=True)
class TaskSpec:
    name: str
    text_columns: tuple[str, ...]
    label_names: tuple[str, ...]  # empty for regression
    metric: str
    max_length: int = 128
    eval_splits: tuple[str, ...] = ("validation",)
    test_splits: tuple[str, ...] = ("test",)
    hub_config: str | None = None
    tsv: TsvLayout | None = None
    submission_names: dict[str, str] = field(default_factory=dict)  # test split -> GLUE server file name

    @property
    def is_regression(self) -> bool:
        return not self.label_names

    @property
    def num_labels(self) -> int:
        return 1 if self.is_regression else len(self.label_names)


def _glue(
    name: str,
    hub_config: str,
    text_columns: tuple[str, ...],
    label_names: tuple[str, ...],
    metric: str,
    file_columns: tuple[str, ...],
    label_column: str,
    label_values: tuple[str, ...] = ("0", "1"),
    max_length: int = 128,
    **layout: object,
) -> TaskSpec:
    splits = {"train": "train", "validation": "dev", "test": "test"}
    columns = dict(zip(text_columns, file_columns, strict=True)) | {"label": label_column}
    return TaskSpec(
        name=name,
        text_columns=text_columns,
        label_names=label_names,
        metric=metric,
        max_length=max_length,
        hub_config=hub_config,
        tsv=TsvLayout(folder=name, files=splits, columns=columns, label_values=label_values, **layout),
        submission_names={"test": name},
    )


_MNLI_LABELS = ("entailment", "neutral", "contradiction")

GLUE_TASKS: dict[str, TaskSpec] = {
    "CoLA": _glue(
        "CoLA", "cola", ("sentence",), ("unacceptable", "acceptable"), "matthews", ("sentence",), "label",
        headerless_names=("source", "label", "original_label", "sentence"),
    ),
    "SST-2": _glue("SST-2", "sst2", ("sentence",), ("negative", "positive"), "accuracy", ("sentence",), "label"),
    "MRPC": _glue(
        "MRPC", "mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), "f1_accuracy",
        ("#1 String", "#2 String"), "Quality",
    ),
    "QQP": _glue(
        "QQP", "qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), "f1_accuracy",
        ("question1", "question2"), "is_duplicate", index_column="id",
    ),
    "STS-B": _glue(
        "STS-B", "stsb", ("sentence1", "sentence2"), (), "pearson_spearman", ("sentence1", "sentence2"), "score",
        label_values=(),
    ),
    "MNLI": TaskSpec(
        name="MNLI",
        text_columns=("premise", "hypothesis"),
        label_names=_MNLI_LABELS,
        metric="accuracy",
        eval_splits=("validation_matched", "validation_mismatched"),
        test_splits=("test_matched", "test_mismatched"),
        hub_config="mnli",
        tsv=TsvLayout(
            folder="MNLI",
            files={
                "train": "train",
                "validation_matched": "dev_matched",
                "validation_mismatched": "dev_mismatched",
                "test_matched": "test_matched",
                "test_mismatched": "test_mismatched",
            },
            columns={"premise": "sentence1", "hypothesis": "sentence2", "label": "gold_label"},
            label_values=_MNLI_LABELS,
        ),
        submission_names={"test_matched": "MNLI-m", "test_mismatched": "MNLI-mm"},
    ),
    "QNLI": _glue(
        "QNLI", "qnli", ("question", "sentence"), ("entailment", "not_entailment"), "accuracy",
        ("question", "sentence"), "label", label_values=("entailment", "not_entailment"), max_length=256,
    ),
    "RTE": _glue(
        "RTE", "rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"), "accuracy",
        ("sentence1", "sentence2"), "label", label_values=("entailment", "not_entailment"),
    ),
    "WNLI": _glue(
        "WNLI", "wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), "accuracy",
        ("sentence1", "sentence2"), "label",
    ),
}  # fmt: skip


def glue_task(name: str) -> TaskSpec:
    """Look a GLUE task up by name, forgiving case and dashes (``rte``, ``sst2``, ``STS-B``)."""
    wanted = _normalise(name)
    for spec in GLUE_TASKS.values():
        if _normalise(spec.name) == wanted:
            return spec
    raise ValueError(
        f"Unknown task {name!r}. GLUE tasks: {', '.join(GLUE_TASKS)}. For your own data give data.files "
        "with data.text_columns and data.labels (or data.regression=true)."
    )


def is_glue_task(name: str) -> bool:
    return any(_normalise(spec.name) == _normalise(name) for spec in GLUE_TASKS.values())


def custom_task(
    name: str,
    text_columns: list[str] | tuple[str, ...],
    labels: list[str] | tuple[str, ...] | None = None,
    regression: bool = False,
    metric: str | None = None,
    max_length: int = 128,
) -> TaskSpec:
    """A task on the user's own files: one or two text columns, a ``label`` column and its values."""
    if not 1 <= len(text_columns) <= 2:
        raise ValueError(f"data.text_columns={list(text_columns)} must name one or two text columns.")
    if not isinstance(regression, bool):  # "yes" typed on the command line: text, which would count as true
        raise ValueError(f"data.regression={regression!r} must be true or false.")
    if regression == bool(labels):
        raise ValueError(
            f"Task {name!r}: give data.labels (the label values in class order, e.g. [negative, positive]) "
            "for classification, or data.regression=true for a numeric score; not both."
        )
    repeated = sorted(label for label, count in Counter(map(str, labels or ())).items() if count > 1)
    if repeated:
        raise ValueError(f"data.labels={list(labels)} lists {', '.join(repeated)} more than once: one value per class.")
    metric = metric or ("pearson_spearman" if regression else "accuracy")
    if metric not in METRICS:
        raise ValueError(f"data.metric={metric!r} is not one of {', '.join(METRICS)}.")
    if regression != (metric == "pearson_spearman"):
        raise ValueError(
            f"data.metric={metric!r} does not fit a {'regression' if regression else 'classification'}"
            " task; pearson_spearman is the regression metric."
        )
    return TaskSpec(
        name=name,
        text_columns=tuple(text_columns),
        label_names=tuple(str(label) for label in labels or ()),
        metric=metric,
        max_length=max_length,
    )


def head_label_problem(id2label: Mapping[int, str], task: TaskSpec) -> str | None:
    """Why a fine-tuned classification head cannot serve ``task`` (None when it can): another label count, or label
    names that are not the task's (ignoring case), or the task's in another order. Heads named ``LABEL_0``,
    ``LABEL_1``, … (transformers' default) name nothing, so only their count is checked."""
    head = [str(id2label[i]) for i in sorted(id2label)]
    if len(head) != task.num_labels:
        wanted = "one score (a regression)" if task.is_regression else f"{task.num_labels}: {list(task.label_names)}"
        return f"its head predicts {len(head)} labels {head}, the data {task.name} has {wanted}"
    if task.is_regression or all(re.fullmatch(r"LABEL_\d+", name) for name in head):
        return None
    data = [label.lower() for label in task.label_names]
    if [name.lower() for name in head] == data:
        return None
    if sorted(name.lower() for name in head) == sorted(data):
        return (
            f"its head's classes are {head} in that order, the data's labels {list(task.label_names)}: list them in "
            f"the head's order (data.labels={head})"
        )
    return (
        f"its head's labels are {head}, the data's {list(task.label_names)}; if class 0 is {task.label_names[0]!r} "
        "and so on, rename the labels in the files (or data.labels) to the head's, or the head's (id2label in its "
        "config.json) to the data's"
    )


def trained_on(config: object) -> str | None:
    """The GLUE task a checkpoint's config says it was fine-tuned on: its ``finetuning_task`` (transformers 4's field,
    which its GLUE example sets and version 5 keeps as an extra key; this project's runs write it), by the task's own
    name; None where it names no GLUE task (a user's own data, a pipeline's tag, none)."""
    named = getattr(config, "finetuning_task", None)
    return glue_task(named).name if isinstance(named, str) and is_glue_task(named) else None


def trained_on_problem(config: object, task: TaskSpec) -> str | None:
    """Why a checkpoint whose config names the GLUE task it was fine-tuned on (:func:`trained_on`) cannot serve the
    GLUE task ``task``: it names another. RTE's and QNLI's heads, or MNLI's and a 3-class entailment set's, have the
    same labels, so :func:`head_label_problem` cannot tell them apart. None for a ``task`` of the user's own data."""
    if (named := trained_on(config)) is None or named == task.name or not is_glue_task(task.name):
        return None
    return (
        f"it was fine-tuned on {named}, not {task.name} (its config.json's finetuning_task; remove it if it is wrong)"
    )


# File stems that name a split, not a dataset: ``reviews/train.csv`` is the dataset "reviews".
SPLIT_WORDS = ("train", "training", "dev", "validation", "valid", "val", "test", "data")


def name_from_files(files: Mapping[str, str | Path]) -> str:
    """The name of a user's data when ``data.task`` gives none, from its training file: the file's stem without a
    split word (``reviews_train.csv`` → ``reviews``), or its folder's name when the stem is only a split word
    (``reviews/train.csv`` → ``reviews``). It names the run's folder, headline, W&B run and model card."""
    path = Path(files.get("train") or next(iter(files.values()), "data")).expanduser()
    stem = re.sub(rf"[-_.](?:{'|'.join(SPLIT_WORDS)})$", "", path.stem, flags=re.IGNORECASE)
    if stem.lower() in SPLIT_WORDS:
        stem = path.resolve().parent.name
    return re.sub(r"[^\w.-]+", "_", stem).strip("._") or "own_data"


def _normalise(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")
