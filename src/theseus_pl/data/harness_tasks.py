"""lm-evaluation-harness tasks over a local GLUE folder, for scoring decoder LMs offline.

lm-eval's own ``sst2`` and ``rte`` read GLUE from the Hugging Face hub. These two read the classic GLUE layout
(``data.glue_dir``'s) instead: the splits are written once as JSON lines beside a task YAML that names them by
absolute path (lm-eval resolves a relative ``data_files`` against the working directory, not the YAML). Both are
multiple-choice tasks scored by lm-eval's ``acc``: the choice whose continuation the model finds likelier.

- ``sst2_local``: ``Review: <sentence>\\nSentiment (positive or negative):`` then `` negative`` or `` positive``. Not
  lm-eval's SST-2 prompt (``<sentence>\\nQuestion: Is this sentence positive or negative?\\nAnswer:``), to which
  SmolLM2-135M-Instruct answers "negative" to nearly every review; this one puts it well above chance.
- ``rte_local``: lm-eval's RTE prompt, ``<sentence1>\\nQuestion: <sentence2> True or False?\\nAnswer:`` then `` True``
  (entailment) or `` False``.

The task folder is cached by the GLUE files' contents, so every run of a sweep reads the same one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task


@dataclass(frozen=True)
class LocalTask:
    """A GLUE task as an lm-eval multiple-choice task: ``prompt`` (Jinja over the GLUE columns), one choice per label
    in the GLUE label order."""

    name: str
    glue: str
    prompt: str
    choices: tuple[str, ...]


LOCAL_TASKS = {
    task.name: task
    for task in (
        LocalTask("sst2_local", "SST-2", "Review: {{sentence}}\nSentiment (positive or negative):",
                  ("negative", "positive")),
        LocalTask("rte_local", "RTE", "{{sentence1}}\nQuestion: {{sentence2}} True or False?\nAnswer:",
                  ("True", "False")),
    )
}  # fmt: skip


def local_task_folder(glue_dir: str | Path, tasks: list[str], cache_dir: Path) -> Path:
    """A folder of lm-eval task YAMLs (for ``TaskManager(include_path=...)``) for the ``tasks`` among
    :data:`LOCAL_TASKS`, over ``glue_dir``'s validation split (and train, where there, for few-shot examples).
    A FileNotFoundError or ValueError naming what is missing."""
    source = GlueDirSource(glue_dir)
    chosen = [LOCAL_TASKS[name] for name in tasks]
    splits = {task.name: _splits(source, task) for task in chosen}
    fingerprints = [f"{task.name}:{task.prompt}:{task.choices}" for task in chosen] + [
        source.fingerprint(glue_task(task.glue), split) for task in chosen for split in splits[task.name]
    ]
    digest = hashlib.sha256("\n".join(fingerprints).encode()).hexdigest()[:20]
    path = (cache_dir / f"lm-eval-tasks-{digest}").absolute()

    def build(staging: Path) -> None:
        for task in chosen:
            files = {}
            for split in splits[task.name]:
                rows = source.read(glue_task(task.glue), split)
                rows = rows.map(lambda row: {column: _stripped(value) for column, value in row.items()})
                rows.to_json(staging / f"{task.name}_{split}.jsonl", lines=True)
                files[split] = str(path / f"{task.name}_{split}.jsonl")  # where the staging folder will be
            (staging / f"{task.name}.yaml").write_text(yaml.safe_dump(_definition(task, files), sort_keys=False))

    def load(folder: Path) -> Path:
        missing = [task.name for task in chosen if not (folder / f"{task.name}.yaml").is_file()]
        if missing:
            raise FileNotFoundError(f"no task file for {', '.join(missing)} in {folder}")
        return folder

    folder, _ = load_or_build(path, load, build, "lm-eval tasks over GLUE")
    return folder


def _splits(source: GlueDirSource, task: LocalTask) -> list[str]:
    """validation (required), and train where the folder has it."""
    spec = glue_task(task.glue)
    source.path(spec, "validation")  # raises, naming the missing file
    try:
        source.path(spec, "train")
    except FileNotFoundError:
        return ["validation"]
    return ["validation", "train"]


def _stripped(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


def _definition(task: LocalTask, files: dict[str, str]) -> dict[str, object]:
    """The task's lm-eval YAML; ``files``: its splits' JSON lines by absolute path."""
    definition: dict[str, object] = {
        "task": task.name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": files},
        "output_type": "multiple_choice",
        "validation_split": "validation",
        "doc_to_text": task.prompt,
        "doc_to_target": "label",
        "doc_to_choice": list(task.choices),
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0},
    }
    if "train" in files:
        definition |= {"training_split": "train", "fewshot_split": "train"}
    return definition
