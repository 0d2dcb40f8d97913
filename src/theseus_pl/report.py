"""Tables and plots from finished runs: ``python -m theseus_pl.report RUN_DIR [RUN_DIR ...] [--output report]``
(or ``theseus-pl-report``).

Reads every ``results.json`` below the folders and writes, into ``--output``:

- ``table.md`` and ``table.csv``: one row per value of ``--rows`` (default ``method``; ``method,theseus.init``:
  a row per method and start), one column per task, and
  the macro average over tasks. A cell is the best dev score over the settings a sweep varied, each setting first
  reduced to its median over seeds (as the paper reports). The predecessor gets a row of its own.
- ``best_settings.md`` and ``best_settings.csv``: for each cell, the grid point chosen, its median, min and max
  over seeds and the seeds. A warning is printed when rows had different step budgets or predecessors, or a
  cell's grid point lacks a seed another row's holds or holds two runs of one.
- ``runs.md`` and ``runs.csv``: every run — task, method, scores, its folder and, when it had one, its W&B
  run's name and URL — so a cell of the table leads to the runs behind it.
- ``shapes.md`` and ``shapes.csv``, when the runs' successors differ in shape: the depth-against-width table
  (``shape_table``), each shape at its best grid point: its parameters, score spread over seeds and measured
  speed-up.
- ``budget.md`` and ``budget.csv``, when a task ran at more than one step budget (``trainer.max_steps``, e.g.
  ``+sweep=budget``): per task, row and budget, the best grid point's median, min and max over seeds; and
  ``budget_<task>.png``, each row's median score against optimizer steps with its min-max band.
- ``p_over_steps.png``: the replacement rate logged by each schedule over the training steps.
- ``score_vs_rate.png``: successor score against the constant replacing rate ``p`` (when such runs exist).
- ``lm_table.md``/``.csv``, ``lm_runs.md``/``.csv`` and ``perplexity_vs_layers.png``, for decoder-LM runs
  (``+experiment=smollm2_quick``, ``+sweep=lm_protocol``): per method and kept layers, held-out perplexity over
  seeds, KL and agreement with the predecessor, tokens trained and decode speed-up (``kinds.language_model.report``).
- ``embedding_table.md``/``.csv``, for sentence-embedding runs (``+experiment=minilm_embedding_quick``): a line per
  run, STS-B dev Spearman of both models, the share kept, cosine and MSE to the teacher's vectors and the speed-ups
  at batch 1 and 32 (``kinds.embedding_model.report``).

A folder of a half-finished Hydra multirun is reported with what finished; the jobs without results are named.
``--dry-run`` lists the runs found and the files the report would write, and writes none into ``--output``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from theseus_pl.app.config.side_commands import command_parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The report of the folders given; what it wrote (or, with ``--dry-run``, would write)."""
    dry_run = "list the runs found and the files the report would write into --output; write nothing there"
    parser = command_parser("report", __doc__, dry_run)
    parser.add_argument("folders", nargs="+", type=Path, metavar="RUN_DIR", help="run or multirun folders")
    rows_help = (
        "the task models' tables' rows: a results field or setting, e.g. theseus.init; several joined by commas: "
        "method,theseus.init"
    )
    parser.add_argument("--rows", default="method", help=rows_help)  # tables.DEFAULT_ROWS (its pandas: not for --help)
    parser.add_argument("--output", type=Path, default=Path("report"), help="the folder the tables and plots go into")
    args = parser.parse_args(argv)
    # The records' readers and pandas (torch, through the kinds) once the command line is read: --help answers at once.
    from theseus_pl.app.report.tables import report_command

    return report_command(args.folders, args.rows, args.output, args.dry_run, parser.error)


def cli() -> None:
    """The ``theseus-pl-report`` command."""
    main()


if __name__ == "__main__":
    cli()
