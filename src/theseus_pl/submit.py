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

from theseus_pl.app.ship.submission import predict_and_write
from theseus_pl.core.io import load_successor
from theseus_pl.data.datamodule import TextTaskDataModule


def main(argv: Sequence[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="checkpoint folder (or hub id) holding the model and its tokenizer")
    parser.add_argument("--task", required=True, help="GLUE task: CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI")
    parser.add_argument("--glue-dir", help="local GLUE folder in the classic layout; default: the hub")
    parser.add_argument("--output-dir", type=Path, default=Path("submission"))
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cache-dir", help="tokenisation cache (default: ~/.cache/theseus_pl)")
    args = parser.parse_args(argv)

    datamodule = TextTaskDataModule(
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


def cli() -> None:
    """The ``theseus-pl-submit`` command."""
    main()


if __name__ == "__main__":
    cli()
