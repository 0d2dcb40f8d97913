"""GLUE test-server submission files: a task's test split(s) predicted and written as the server reads them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedModel

from theseus_pl.app.predecessors.classifier import looks_like_path
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.ship.deploy_folder import is_run_folder, not_a_model_problem
from theseus_pl.core.io import TOKENIZER_FILES, has_tokenizer, is_pickled, is_sequence_classifier, load_successor
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import GLUE_TASKS, TaskSpec, head_label_problem, trained_on, trained_on_problem
from theseus_pl.lightning.callbacks import progress_bar
from theseus_pl.lightning.modules import ClassifierModule

STSB_RANGE = (0.0, 5.0)


def prediction_strings(task: TaskSpec, logits: torch.Tensor) -> list[str]:
    """Logits to what the GLUE server expects in the ``prediction`` column."""
    if task.is_regression:
        return [f"{score:.3f}" for score in logits.squeeze(-1).clamp(*STSB_RANGE).tolist()]
    values = task.tsv.label_values if task.tsv else task.label_names
    return [values[index] for index in logits.argmax(-1).tolist()]


def submission_model(name: str, task: TaskSpec) -> str:
    """The checkpoint ``name`` gives (a finished run's folder gives its ``successor/``), checked to predict ``task``
    before anything is loaded or predicted; a ValueError listing every problem otherwise: no such folder (or, offline,
    no such hub model), a run folder or a run's ``successor/`` whose run's record names another task, no sequence
    classifier (a causal LM or a bare encoder would predict from a random head), a head of other labels, no tokenizer
    beside it."""
    folder = Path(name).expanduser()
    if folder.is_dir() and not (folder / "config.json").is_file():
        if problem := not_a_model_problem(folder):
            raise ValueError(problem)
        if not is_run_folder(folder):
            raise ValueError(f"{name} holds no config.json: it is not a Hugging Face checkpoint folder.")
        if not (folder / "results.json").is_file() or not (folder / "successor").is_dir():
            raise ValueError(f"{name} is a run folder whose run has not finished (no results.json and successor/).")
        _check_trained_on(folder, task, f"{name} is a run")
        return _checkpoint(str(folder / "successor"), task)
    if folder.is_dir() and folder.name == "successor" and (folder.parent / "results.json").is_file():
        _check_trained_on(folder.parent, task, f"{name} is the successor of a run")
    return _checkpoint(name, task)


def _check_trained_on(run_folder: Path, task: TaskSpec, what: str) -> None:
    """A ValueError where the finished run in ``run_folder`` trained on another task than ``task`` (``what``: how the
    refusal names the folder given): RTE and QNLI share their labels, so its head alone does not tell them apart."""
    run_task = getattr(read_run(run_folder / "results.json"), "task", task.name)
    if run_task not in GLUE_TASKS:  # its own data: no --task names it (--task takes GLUE's names)
        raise ValueError(
            f"{what} on your own data ({run_task}), not a GLUE task: the GLUE server scores only models trained on "
            "a GLUE task's training set; deploy it instead (python -m theseus_pl.deploy)."
        )
    if run_task != task.name:
        raise ValueError(f"{what} on {run_task}, not {task.name}: submit it with --task {run_task}.")


def _checkpoint(name: str, task: TaskSpec) -> str:
    """The checkpoint ``name`` (a folder or a hub id), checked to predict ``task`` as :func:`submission_model` says."""
    folder = Path(name).expanduser()
    if looks_like_path(name) and not folder.exists():
        raise ValueError(f"{name}: no such folder.")
    try:
        config = AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as error:  # offline and not in the cache, or not a model
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{name}: no such folder, nor a hub model that can be read here ({first_line})") from None
    if not is_sequence_classifier(config):
        raise ValueError(
            f"{name} is a {', '.join(config.architectures or []) or 'model of no architecture'}, not a sequence "
            f"classifier: a submission predicts {task.name}'s labels with a classification head fine-tuned on it."
        )
    problems = []
    if problem := head_label_problem(config.id2label, task):
        problems.append(f"{name} does not fit {task.name}: {problem}.")
    elif problem := trained_on_problem(config, task):  # a run's successor copied away from its run, say
        problems.append(f"{name} does not fit {task.name}: {problem}; submit it with --task {trained_on(config)}.")
    if folder.is_dir() and not has_tokenizer(folder):
        problems.append(
            f"{name} holds no tokenizer ({', '.join(TOKENIZER_FILES[:2])} or a vocabulary): save the model's tokenizer "
            "beside it (tokenizer.save_pretrained(folder))."
        )
    if problems:
        raise ValueError(" ".join(problems))
    return name


def load_submission_model(name: str) -> PreTrainedModel:
    """The checked checkpoint, refused where its weights leave any part to a random start (a head it lacks)."""
    if is_pickled(name):
        return load_successor(name)
    model, loading = AutoModelForSequenceClassification.from_pretrained(name, output_loading_info=True)
    if loading["missing_keys"]:
        raise ValueError(
            f"{name} lacks the weights of {', '.join(sorted(loading['missing_keys']))}: they would be random, and so "
            "would its predictions."
        )
    return model.eval()


def test_files(datamodule: TextTaskDataModule) -> list[str]:
    """Where each test split will be read from, a local file checked as reading it checks first (a missing one is
    refused the same way); the hub's splits are only named, as checking them would download them."""
    source, task = datamodule.source, datamodule.task
    if isinstance(source, GlueDirSource):
        return [str(source.path(task, split)) for split in task.test_splits]
    return [f"{split} of {source.describe(task)}" for split in task.test_splits]


def submission_path(task: TaskSpec, split: str, output_dir: Path) -> Path:
    return output_dir / f"{task.submission_names.get(split, task.name)}.tsv"


def write_submission(path: Path, indices: Sequence[int], predictions: Sequence[str]) -> Path:
    if len(indices) != len(predictions):
        raise ValueError(f"{len(indices)} test indices but {len(predictions)} predictions.")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        handle.write("index\tprediction\n")
        handle.writelines(f"{index}\t{prediction}\n" for index, prediction in zip(indices, predictions, strict=True))
    return path


def predict_and_write(
    model: torch.nn.Module, datamodule: TextTaskDataModule, output_dir: Path, trainer: pl.Trainer | None = None
) -> list[Path]:
    """Predict every test split of the datamodule's task and write one submission file per split."""
    trainer = trainer or pl.Trainer(
        accelerator="auto", devices=1, logger=False, enable_checkpointing=False, callbacks=[progress_bar()]
    )
    outputs = trainer.predict(ClassifierModule(model.eval()), datamodule=datamodule)
    splits = datamodule.task.test_splits
    per_split = outputs if len(splits) > 1 else [outputs]
    written = []
    for split, batches in zip(splits, per_split, strict=True):
        logits = torch.cat([batch.float().cpu() for batch in batches])
        path = submission_path(datamodule.task, split, output_dir)
        written.append(
            write_submission(path, datamodule.test_indices[split], prediction_strings(datamodule.task, logits))
        )
    return written
