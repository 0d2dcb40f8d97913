"""Predict a task's test split(s) and write GLUE test-server submission files.

    python -m theseus_pl.submit MODEL_DIR --task RTE [--glue-dir PATH] [--output submission] [--dry-run]

``MODEL_DIR`` is any sequence-classification checkpoint with its tokenizer, such as an exported successor, or a
finished run's folder (its ``successor/``); a model that cannot predict the task (no classification head, a head of
other labels, no tokenizer, weights it lacks) is refused before anything is predicted.
Writes ``<output>/<Task>.tsv`` (``MNLI-m.tsv`` and ``MNLI-mm.tsv`` for MNLI): a header ``index\tprediction``
and one row per test example, with label strings where the task's files use them (``entailment``, …),
class indices for the others and a score in [0, 5] for STS-B. ``--dry-run`` checks the model, the task and its
test files as a real run does before predicting, and lists the files it would write.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from theseus_pl.app.config.side_commands import command_parser, count_of, in_flags, refuse


def main(argv: Sequence[str] | None = None) -> list[Path]:
    """Write the submission files (or, with ``--dry-run``, only check and list them); returns their paths."""
    dry_run = "check the model, the task and its test files and list the files it would write; predict nothing"
    parser = command_parser("submit", __doc__, dry_run)
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="checkpoint folder (or hub id): model and tokenizer")
    parser.add_argument("--task", required=True, help="GLUE task: CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE, WNLI")
    parser.add_argument("--glue-dir", help="local GLUE folder in the classic layout; default: the hub")
    parser.add_argument("--output", type=Path, default=Path("submission"), help="the folder the .tsv files go into")
    parser.add_argument("--batch-size", type=count_of("batch size"), default=64, help="test rows per prediction batch")
    parser.add_argument("--cache-dir", help="tokenisation cache (default: ~/.cache/theseus_pl)")
    args = parser.parse_args(argv)
    if args.output.exists() and not args.output.is_dir():  # found here, not after every test row was predicted
        refuse(f"--output {args.output} is a file: give a folder for the .tsv files (made where it is missing).")
    # What predicts (torch, transformers) once the command line is read: --help answers at once.
    from theseus_pl.app.ship.submission import (
        load_submission_model,
        predict_and_write,
        submission_model,
        submission_path,
        test_files,
    )
    from theseus_pl.data.datamodule import TextTaskDataModule
    from theseus_pl.data.tasks import glue_task
    from theseus_pl.data.tokenized import default_cache_dir

    try:
        task = glue_task(args.task)
        model = submission_model(args.model_dir, task)
        datamodule = TextTaskDataModule(
            task.name, model, glue_dir=args.glue_dir, batch_size=args.batch_size, cache_dir=args.cache_dir
        )
        if args.dry_run:
            load_submission_model(model)
            sources = test_files(datamodule)
            planned = [submission_path(task, split, args.output) for split in task.test_splits]
            cache = datamodule.cache_dir or default_cache_dir()
            print(f"Dry run: nothing was predicted. {model} would predict {', '.join(sources)} in batches of "
                  f"{args.batch_size} (tokenised into {cache}) and write:")  # fmt: skip
            print("\n".join(f"  {path}" for path in planned))
            return planned
        written = predict_and_write(load_submission_model(model), datamodule, args.output)
    except (OSError, ValueError) as error:
        refuse(in_flags(str(error), ["--glue-dir"]))  # the hub's too: without --glue-dir, the flag to give
    for path in written:
        print(f"wrote {path}")
    return written


def cli() -> None:
    """The ``theseus-pl-submit`` command."""
    main()


if __name__ == "__main__":
    cli()
