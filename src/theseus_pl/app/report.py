"""Tables and plots from finished runs: ``python -m theseus_pl.report <run or multirun folders…>``.

Reads every ``results.json`` below the folders and writes, into ``--output``:

- ``table.md`` and ``table.csv``: one row per value of ``--rows`` (default ``method``), one column per task, and
  the macro average over tasks. A cell is the best dev score over the settings a sweep varied, each setting first
  reduced to its median over seeds (as the paper reports). The predecessor gets a row of its own.
- ``best_settings.md`` and ``best_settings.csv``: for each cell, the grid point chosen, its median, min and max
  over seeds and the seeds. A warning is printed when rows had different step budgets or one lacks a seed.
- ``runs.md`` and ``runs.csv``: every run — task, method, scores, its folder and, when it had one, its W&B
  run's name and URL — so a cell of the table leads to the runs behind it.
- ``shapes.md`` and ``shapes.csv``, when the runs' successors differ in shape: the depth-against-width table
  (``shape_table``), each shape's parameters, score spread over seeds and measured speed-up.
- ``p_over_steps.png``: the replacement rate logged by each schedule over the training steps.
- ``score_vs_rate.png``: successor score against the constant replacing rate ``p`` (when such runs exist).

A folder of a half-finished Hydra multirun is reported with what finished; the jobs without results are named.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from theseus_pl.app.results import RunResults, read_results
from theseus_pl.app.shape_table import SHAPE_COLUMNS, shape_rows

PREDECESSOR = "predecessor"


def find_runs(folders: Sequence[Path]) -> tuple[list[RunResults], list[str]]:
    """Every run's results (each with its ``folder``), and the Hydra jobs that have none yet."""
    runs, missing = [], []
    for folder in folders:
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder.")
        for results in sorted(folder.rglob("results.json")):
            if _is_wandb_copy(results):
                continue
            runs.append(read_results(results))
        for job in sorted(folder.rglob(".hydra")):
            if not (job.parent / "results.json").is_file():
                overrides = job / "overrides.yaml"
                what = " ".join(line.removeprefix("- ").strip() for line in overrides.read_text().splitlines()) \
                    if overrides.is_file() else ""  # fmt: skip
                missing.append(f"{job.parent} ({what})" if what else str(job.parent))
    if not runs:
        raise FileNotFoundError(
            f"No results.json under {', '.join(map(str, folders))}: give the folders of finished runs (a run folder "
            "or a multirun folder such as multirun/2026-01-01_12-00-00)."
        )
    return runs, missing


def _is_wandb_copy(results: Path) -> bool:
    """The copy each run saves into its W&B run's files (``wandb/offline-run-*/files/``): the same run again."""
    run_folder = results.parent.parent.name
    return results.parent.name == "files" and run_folder.startswith(("run-", "offline-run-"))


def _row_key(run: RunResults, rows: str) -> str:
    value = run.lookup(rows)
    if value is None:
        value = run.settings.get(rows)
    return str(value)


@dataclass(frozen=True)
class BestSetting:
    """A row's cell for one task: the grid point whose median over seeds is best, and its spread."""

    median: float
    low: float
    high: float
    seeds: tuple[Any, ...]
    point: str  # the values that set this grid point apart from the row's other runs on the task


def best_settings(runs: list[RunResults], rows: str = "method") -> dict[tuple[str, str], BestSetting]:
    """``{(row, task): best setting}``: each setting's scores reduced to their median over seeds, the best kept."""
    scores: dict[tuple[str, str], dict[str, list[tuple[Any, float]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        setting = {k: v for k, v in run.settings.items() if k != "seed"}
        seed = run.settings.get("seed", run.seed)
        scores[(_row_key(run, rows), run.task)][json.dumps(setting, sort_keys=True)].append((seed, run.successor.score))
    best = {}
    for cell, by_setting in scores.items():
        varied = varied_keys([json.loads(setting) for setting in by_setting])
        candidates = []
        for setting, seeded in by_setting.items():
            values = [score for _, score in seeded]
            point = " ".join(f"{key}={json.loads(setting)[key]}" for key in varied)
            candidates.append(BestSetting(
                statistics.median(values), min(values), max(values), tuple(seed for seed, _ in seeded), point
            ))  # fmt: skip
        best[cell] = max(candidates, key=lambda candidate: candidate.median)
    return best


def varied_keys(settings: list[dict[str, Any]]) -> list[str]:
    """The keys whose values differ between the settings (a key some lack counts as differing)."""
    keys = sorted({key for setting in settings for key in setting})
    return [key for key in keys if len({json.dumps(setting.get(key)) for setting in settings}) > 1]


def build_table(runs: list[RunResults], rows: str = "method") -> tuple[list[str], dict[str, dict[str, float]]]:
    """Tasks (columns) and ``{row: {task: score}}``, the predecessor first: each cell a best setting's median."""
    predecessor: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        predecessor[run.task].append(run.predecessor.score)
    table: dict[str, dict[str, float]] = {PREDECESSOR: {t: statistics.median(s) for t, s in predecessor.items()}}
    for (row, task), best in best_settings(runs, rows).items():
        table.setdefault(row, {})[task] = best.median
    return sorted(predecessor), table


def protocol_warnings(runs: list[RunResults], rows: str = "method") -> list[str]:
    """What makes a comparison between rows unfair: different step budgets, or seeds one row lacks."""
    budgets: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    seeds: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    for run in runs:
        budgets[run.task][_row_key(run, rows)].add(run.settings.get("trainer.max_steps"))
        seeds[run.task][_row_key(run, rows)].add(run.settings.get("seed", run.seed))
    warnings = []
    for task in sorted(budgets):
        if len({tuple(sorted(map(str, steps))) for steps in budgets[task].values()}) > 1:
            named = "; ".join(f"{row} {', '.join(sorted(map(str, s)))}" for row, s in sorted(budgets[task].items()))
            warnings.append(f"{task}: the {rows}s had different step budgets (trainer.max_steps): {named}.")
        every = set().union(*seeds[task].values())
        for row, row_seeds in sorted(seeds[task].items()):
            if row_seeds != every:
                lacking = ", ".join(sorted(map(str, every - row_seeds)))
                warnings.append(f"{task}: {row} lacks seed {lacking}, which other {rows}s ran.")
    return warnings


def write_best_settings(best: dict[tuple[str, str], BestSetting], rows: str, output: Path) -> list[Path]:
    """Per task and row: the chosen grid point, its median, min and max over seeds, and the seeds."""
    header = ["task", rows, "median", "min", "max", "seeds", "grid point"]
    lines = [
        [task, row, _cell(b.median), _cell(b.low), _cell(b.high), " ".join(map(str, sorted(b.seeds, key=str))), b.point]
        for (row, task), b in sorted(best.items(), key=lambda item: (item[0][1], item[0][0]))
    ]
    return _write_markdown_and_csv(output, "best_settings", header, lines)


def macro(cells: dict[str, float], tasks: list[str]) -> float | None:
    return statistics.fmean(cells[t] for t in tasks) if all(t in cells for t in tasks) else None


def write_tables(tasks: list[str], table: dict[str, dict[str, float]], rows: str, output: Path) -> list[Path]:
    header = [rows, *tasks, "macro"]
    lines = [[name, *(_cell(cells.get(t)) for t in tasks), _cell(macro(cells, tasks))] for name, cells in table.items()]
    return _write_markdown_and_csv(output, "table", header, lines)


RUN_COLUMNS = ["task", "method", "predecessor", "successor", "wandb", "wandb_url", "folder"]


def run_rows(runs: list[RunResults]) -> list[dict[str, Any]]:
    """One row per run, sorted by task and method, with its W&B name and URL where it has them."""
    rows = [
        {
            "task": run.task,
            "method": run.method,
            "predecessor": run.predecessor.score,
            "successor": run.successor.score,
            "wandb": (run.wandb.name or "") if run.wandb else "",
            "wandb_url": (run.wandb.url or "") if run.wandb else "",
            "folder": str(run.folder or ""),
        }
        for run in runs
    ]
    return sorted(rows, key=lambda row: (row["task"], row["method"], row["folder"]))


def write_shapes(runs: list[RunResults], output: Path) -> list[Path]:
    """The depth-against-width table, when the runs' successors differ in shape."""
    rows = shape_rows(runs)
    if not rows:
        return []
    return _write_markdown_and_csv(output, "shapes", SHAPE_COLUMNS, [_cells(row) for row in rows])


def write_runs(runs: list[RunResults], output: Path) -> list[Path]:
    return _write_markdown_and_csv(output, "runs", RUN_COLUMNS, [_cells(row) for row in run_rows(runs)])


def _cells(row: dict[str, Any]) -> list[str]:
    """A row's values as table cells: numbers to two decimals, None empty, anything else as text."""
    return [_cell(v) if v is None or isinstance(v, float) else str(v) for v in row.values()]


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _write_markdown_and_csv(output: Path, stem: str, header: list[str], lines: list[list[str]]) -> list[Path]:
    """``<stem>.md`` (a Markdown table) and ``<stem>.csv`` with the same header and cells."""
    markdown = output / f"{stem}.md"
    markdown.write_text(
        "\n".join(
            ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(line) + " |" for line in lines]
        )
        + "\n"
    )
    table_csv = output / f"{stem}.csv"
    with table_csv.open("w", newline="") as handle:
        csv.writer(handle).writerows([header, *lines])
    return [markdown, table_csv]


def write_plots(runs: list[RunResults], output: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    output.mkdir(parents=True, exist_ok=True)
    written = []
    curves = {}
    for run in runs:
        metrics = run.folder / "csv" / "metrics.csv" if run.folder else None
        if run.schedule in curves or metrics is None or not metrics.is_file():
            continue
        with metrics.open() as handle:
            points = [(int(r["step"]), float(r["train/p"])) for r in csv.DictReader(handle) if r.get("train/p")]
        if points:
            curves[run.schedule] = points
    if curves:
        figure, axes = plt.subplots(figsize=(7, 4))
        for schedule, points in curves.items():
            axes.plot(*zip(*points, strict=True), label=schedule)
        axes.set(xlabel="optimizer step", ylabel="replacement rate p", title="p over steps")
        axes.legend(fontsize=7)
        written.append(output / "p_over_steps.png")
        figure.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(figure)
    constant = [r for r in runs if r.method == "theseus_constant" and "replacement.p" in r.settings]
    if constant:
        figure, axes = plt.subplots(figsize=(6, 4))
        for task in sorted({r.task for r in constant}):
            points = sorted((r.settings["replacement.p"], r.successor.score) for r in constant if r.task == task)
            axes.plot(*zip(*points, strict=True), marker="o", label=task)
        axes.set(xlabel="replacing rate p", ylabel="dev score", title="score against replacing rate")
        axes.legend()
        written.append(output / "score_vs_rate.png")
        figure.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(figure)
    return written


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="run or multirun folders")
    parser.add_argument("--rows", default="method", help="results field or setting per row, e.g. theseus.init")
    parser.add_argument("--output", type=Path, default=Path("report"))
    args = parser.parse_args(argv)

    runs, missing = find_runs(args.folders)
    tasks, table = build_table(runs, args.rows)
    warnings = protocol_warnings(runs, args.rows)
    args.output.mkdir(parents=True, exist_ok=True)
    written = (
        write_tables(tasks, table, args.rows, args.output)
        + write_best_settings(best_settings(runs, args.rows), args.rows, args.output)
        + write_runs(runs, args.output)
        + write_shapes(runs, args.output)
        + write_plots(runs, args.output)
    )
    print((args.output / "table.md").read_text())
    print(f"{len(runs)} finished runs; wrote {', '.join(str(p) for p in written)}")
    if missing:
        print(f"{len(missing)} jobs have no results yet:\n  " + "\n  ".join(missing))
    for warning in warnings:
        print(f"Warning: {warning}")
    return {"tasks": tasks, "table": table, "missing": missing, "warnings": warnings, "written": written}
