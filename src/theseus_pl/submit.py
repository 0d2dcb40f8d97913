"""Predict a task's test split(s) and write GLUE test-server submission files.

    python -m theseus_pl.submit MODEL_DIR --task RTE [--glue-dir PATH] [--output-dir submission]

``MODEL_DIR`` is any sequence-classification checkpoint with its tokenizer, such as an exported successor.
Writes ``<output-dir>/<Task>.tsv`` (``MNLI-m.tsv`` and ``MNLI-mm.tsv`` for MNLI): a header ``index\tprediction``
and one row per test example, with label strings where the task's files use them (``entailment``, …),
class indices for the others and a score in [0, 5] for STS-B.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch

from theseus_pl.core.io import load_successor
from theseus_pl.data.datamodule import GlueDataModule
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.modules import ClassifierModule

STSB_RANGE = (0.0, 5.0)


def prediction_strings(task: TaskSpec, logits: torch.Tensor) -> list[str]:
    """Logits to what the GLUE server expects in the ``prediction`` column."""
    if task.is_regression:
        return [f"{score:.3f}" for score in logits.squeeze(-1).clamp(*STSB_RANGE).tolist()]
    values = task.tsv.label_values if task.tsv else task.label_names
    return [values[index] for index in logits.argmax(-1).tolist()]


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
    model: torch.nn.Module, datamodule: GlueDataModule, output_dir: Path, trainer: pl.Trainer | None = None
) -> list[Path]:
    """Predict every test split of the datamodule's task and write one submission file per split."""
    trainer = trainer or pl.Trainer(accelerator="auto", devices=1, logger=False, enable_checkpointing=False)
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


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="checkpoint folder (or hub id) holding the model and its tokenizer")
    parser.add_argument("--task", required=True, help="GLUE task: CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI")
    parser.add_argument("--glue-dir", help="local GLUE folder in the classic layout; default: the hub")
    parser.add_argument("--output-dir", type=Path, default=Path("submission"))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cache-dir", help="tokenisation cache (default: ~/.cache/theseus_pl)")
    args = parser.parse_args(argv)

    datamodule = GlueDataModule(
        args.task, args.model_dir, glue_dir=args.glue_dir, batch_size=args.batch_size, cache_dir=args.cache_dir
    )
    model = load_successor(args.model_dir)
    if model.config.num_labels != datamodule.task.num_labels:
        raise ValueError(
            f"{args.model_dir} predicts {model.config.num_labels} labels but {datamodule.task.name} has "
            f"{datamodule.task.num_labels}; is it a model for another task?"
        )
    written = predict_and_write(model, datamodule, args.output_dir)
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
