"""The task models' tables and plots in ``python -m theseus_pl.report`` (:mod:`theseus_pl.report` lists them): the
protocol's table (a row per ``--rows`` value, a column per task, each cell the best grid point's median over seeds),
the best settings, every run, the shapes, the budget curves and the replacement plots."""

from __future__ import annotations

import csv
import dataclasses
import difflib
import statistics
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any

import pandas as pd

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.kinds.task_model.shape_table import shape_table
from theseus_pl.app.report.files import PREDECESSOR, write_markdown_and_csv
from theseus_pl.app.report.over_seeds import best_points, in_seed_order, point_columns, spread_over_seeds
from theseus_pl.app.report.tables import REPORT, find_records, no_results
from theseus_pl.app.results.envelope import by_kind
from theseus_pl.app.results.registry import ReportPart, parts


def find_runs(folders: Sequence[Path]) -> tuple[list[TaskModelResults], list[str]]:
    """Every task-model run's results (each with its ``folder``), and the Hydra jobs that have none yet; no such run
    is an error."""
    records, missing = find_records(folders)
    runs = by_kind(records, parts("report"), REPORT)[TASK_MODEL]
    if not runs:
        raise no_results(folders)
    return runs, missing


def _row_key(run: TaskModelResults, rows: str) -> str:
    """The run's row: the value of ``rows``, a results field or setting, or of each of several joined by commas
    (``method,theseus.init``: ``fine_tuning every_other``). A name the run has no value for reads ``no NAME``, and the
    row then names the run's method where ``rows`` does not: the runs of every method lacking it (the baselines under
    ``--rows replacement.rate``) shared one row, its cell one best point among methods."""
    names = rows.split(",")
    values = [_row_value(run, name) for name in names]
    key = " ".join(f"no {name}" if value is None else str(value) for name, value in zip(names, values, strict=True))
    return f"{key} ({run.method})" if None in values and "method" not in names else key


def _row_value(run: TaskModelResults, name: str) -> Any:
    """The value of one ``--rows`` name for the run: its results field (a dotted path), else its setting; None where
    it has neither."""
    value = run.lookup(name)
    return run.settings.get(name) if value is None else value


def step_budget(settings: dict[str, Any]) -> str:
    """A run's training budget in words, from its settings: ``trainer.max_steps`` (``600``), its epochs where
    ``trainer.max_epochs`` bounds it (``3 epochs``; ``600 or 3 epochs`` where both do), ``None`` where not recorded."""
    steps, epochs = settings.get("trainer.max_steps"), settings.get("trainer.max_epochs")
    if epochs is None:
        return str(steps)
    return f"{epochs} epochs" if steps is None or steps < 0 else f"{steps} or {epochs} epochs"


def run_frame(runs: list[TaskModelResults], rows: str = "method") -> pd.DataFrame:
    """One line per run, what the tables are computed from: its table row (the ``--rows`` value, as text), task, seed,
    step budget (:func:`step_budget`), scores, its predecessor's checkpoint (:func:`predecessor_checkpoint`) and
    folder, the model it names (its ``model`` setting, the predecessor or base named; an older record's
    ``base_model``), its own folder (empty where it was read from none), its settings but the seed, and those as
    JSON (``point``: the grid point it ran)."""
    return pd.DataFrame({
        "row": [_row_key(run, rows) for run in runs],
        "task": [run.task for run in runs],
        "budget": [step_budget(run.settings) for run in runs],
        "score": pd.array([run.successor.score for run in runs], dtype=float),
        "predecessor": pd.array([run.predecessor.score for run in runs], dtype=float),
        "checkpoint": [predecessor_checkpoint(run) for run in runs],
        "predecessor dir": [run.predecessor.dir for run in runs],
        "model": [run.settings.get("model") or run.base_model for run in runs],
        "folder": [str(run.folder or "") for run in runs],
        **point_columns(runs),
    })  # fmt: skip


def predecessor_checkpoint(run: TaskModelResults) -> str:
    """What tells the run's predecessor from another: a cached one by its cache entry's name, the key of everything
    that made it (base model, data, fine-tuning settings, seed), wherever that cache lay (runs gathered from two
    machines' caches); a given one by its path or hub id as given."""
    cached = run.predecessor.origin in ("cache", "fine-tuned")
    return PurePath(run.predecessor.dir).name if cached else run.predecessor.dir


def best_settings(runs: list[TaskModelResults], rows: str = "method") -> pd.DataFrame:
    """Per task and row, the grid point with the best median over seeds (:func:`chosen_points`): its ``median``,
    ``min`` and ``max``, its ``seeds`` and, as ``grid point``, the settings that set it apart from the cell's other
    points."""
    return chosen_points(run_frame(runs, rows))[["task", "row", "median", "min", "max", "seeds", "grid point"]]


def chosen_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task and row of :func:`run_frame`'s ``frame``, the grid point its cell gives (:func:`best_points`, which
    says how unscored seeds and points run at fewer seeds are weighed), sorted by task and row: what the table and
    the best settings show and what :func:`protocol_warnings` checks, chosen in one place."""
    return best_points(frame, ["row", "task"]).sort_values(["task", "row"])


def build_table(runs: list[TaskModelResults], rows: str = "method") -> tuple[list[str], dict[str, dict[str, float]]]:
    """Tasks (columns) and ``{row: {task: score}}``, rows in the order of the runs, the predecessor first (the median
    of its scores, each predecessor once: the runs of a seed share one, and eight runs of one seed beside one run of
    each other seed must not make it the median; none where a seed's predecessor has no score, as a successor's cell
    is none where a seed has none, by the same :func:`spread_over_seeds`: the others' median would read as every
    seed's): each cell a best setting's median, none where that has none."""
    frame = run_frame(runs, rows)
    cells = best_settings(runs, rows).pivot(index="row", columns="task", values="median")
    predecessors = frame.drop_duplicates(["task", "seed", "predecessor"]).groupby("task")["predecessor"]
    predecessor = spread_over_seeds(predecessors)["median"].rename(PREDECESSOR).to_frame().T
    table = pd.concat([predecessor, cells.reindex(index=frame["row"].unique(), columns=predecessor.columns)])
    return list(table.columns), {row: line.dropna().to_dict() for row, line in table.iterrows()}


def table_frame(tasks: list[str], table: dict[str, dict[str, float]]) -> pd.DataFrame:
    """:func:`build_table`'s table as a frame, with ``macro``: the tasks' mean, missing where a task is."""
    frame = pd.DataFrame.from_dict(table, orient="index").reindex(columns=tasks)
    # fmean, whose sum is exactly rounded, gives the macro to the last digit whatever the order of the tasks.
    return frame.assign(macro=frame.apply(statistics.fmean, axis=1))


def protocol_warnings(runs: list[TaskModelResults], rows: str = "method") -> list[str]:
    """What makes a comparison between rows unfair: the points the cells give trained for different step budgets
    (those compared, not every budget a cell ran: rows that each ran 600 and 1,800 steps may give one at 600 beside
    another at 1,800), different predecessors (:func:`predecessors_apart`), or a cell's chosen point not holding each
    seed once (:func:`seed_warnings`)."""
    frame = run_frame(runs, rows)
    chosen = chosen_points(frame)
    chosen = chosen.assign(budget=[step_budget(settings) for settings in chosen["settings"]])
    warnings = []
    for task, task_points in chosen.groupby("task"):
        if task_points["budget"].nunique() > 1:
            named = "; ".join(f"{point.row} {point.budget}" for point in task_points.itertuples())
            warnings.append(
                f"{task}: the {rows}s had different step budgets (trainer.max_steps, trainer.max_epochs): {named}."
            )
        if apart := predecessors_apart(frame[frame["task"] == task]):
            warnings.append(
                f"{task}: the runs compressed different predecessors, so their scores do not compare and the "
                f"predecessor row pools them: {apart}. Report each predecessor's runs apart, or give every run the "
                "same model and fine-tuning."
            )
        warnings += seed_warnings(chosen[chosen["task"] == task], rows)
    return warnings


def seed_warnings(task_points: pd.DataFrame, rows: str) -> list[str]:
    """Where one task's chosen points (:func:`chosen_points`) are no medians over the same seeds: a point lacking a
    seed another row's point holds (a grid explored at one seed a point, beside a row run at three seeds: that cell
    is one seed's score), and a point holding two runs of one seed (``repeated``, their folders named), which its
    median counts twice. The points the cells give are checked, not every run of a cell: a cell whose runs span
    every seed may still give a point run at one, and a cell whose runs lack a seed may give a point as complete as
    the other rows'."""
    every = frozenset().union(*task_points["seed set"])
    warnings = []
    for point in task_points.to_dict("records"):
        cell = f"{point['task']}: {point['row']}" + (
            f" at its grid point {point['grid point']}" if point["grid point"] else ""
        )
        if lacking := every - point["seed set"]:
            warnings.append(f"{cell} lacks seed {', '.join(in_seed_order(lacking))}, which other {rows}s ran.")
        if repeated := point["repeated"]:
            counted = "; ".join(
                f"seed {seed} {_times(len(folders))}"
                + (f" ({', '.join(named)})" if (named := [f for f in folders if f]) else "")
                for seed, folders in repeated.items()
            )
            warnings.append(
                f"{cell} ran {counted}: its median, min and max count a seed more than once where its seeds name it "
                "once (copied folders, or a swept setting the record does not keep). Keep one run of each seed."
            )
    return warnings


def _times(count: int) -> str:
    return "twice" if count == 2 else f"{count} times"


def predecessors_apart(task_runs: pd.DataFrame) -> str:
    """How one task's runs (:func:`run_frame`'s lines) differ in their predecessor, in words; empty where they share
    one. Seeds rightly differ (the seed is in a fine-tuned predecessor's cache key), so the runs of each seed are
    compared: one checkpoint (:func:`predecessor_checkpoint`) and one score, as the score is shown (a checkpoint
    scored otherwise was scored on other dev rows, or retrained under its key in another cache, and the predecessor
    row counts it twice). Across seeds the checkpoints differ by design, so there the model the runs name (the
    ``model`` setting: the predecessor or base, by path or hub id; ``base_model`` in a record written before the
    setting, where that model is on the hub) tells two apart."""

    def by_rows(lines: pd.DataFrame, named: str) -> list[str]:
        return [
            f"{name} ({', '.join(dict.fromkeys(of_name['row']))})" for name, of_name in lines.groupby(named, sort=False)
        ]

    scored = task_runs["predecessor"].map(lambda score: "nothing" if pd.isna(score) else f"{score:.2f}")
    shown = task_runs.assign(
        named=task_runs["predecessor dir"] + " scoring " + scored, key=task_runs["checkpoint"] + " " + scored
    )
    seeds = {seed: by_rows(lines, "named") for seed, lines in shown.groupby("seed") if lines["key"].nunique() > 1}
    apart = []
    if seeds:
        (first, named), others = next(iter(seeds.items())), list(seeds)[1:]
        apart.append(
            f"at seed {first} {', '.join(named)}" + (f", and at seed {', '.join(others)} too" if others else "")
        )
    if shown["model"].nunique() > 1:  # nunique counts no missing one
        apart.append(f"models {', '.join(by_rows(shown.dropna(subset='model'), 'model'))}")
    return "; ".join(apart)


def write_tables(tasks: list[str], table: dict[str, dict[str, float]], rows: str, output: Path) -> list[Path]:
    """:func:`build_table`'s table with its macro column, a line per row (named ``rows``)."""
    return write_markdown_and_csv(table_frame(tasks, table).rename_axis(rows).reset_index(), output, "table")


def write_best_settings(best: pd.DataFrame, rows: str, output: Path) -> list[Path]:
    """Per task and row: the chosen grid point, its median, min and max over seeds, and the seeds."""
    return write_markdown_and_csv(best.rename(columns={"row": rows}), output, "best_settings")


def run_table(runs: list[TaskModelResults]) -> pd.DataFrame:
    """One line per run, sorted by task, method and folder, with its W&B name and URL where it has them."""
    return pd.DataFrame({
        "task": [run.task for run in runs],
        "method": [run.method for run in runs],
        "predecessor": pd.array([run.predecessor.score for run in runs], dtype=float),
        "successor": pd.array([run.successor.score for run in runs], dtype=float),
        "wandb": [(run.wandb.name or "") if run.wandb else "" for run in runs],
        "wandb_url": [(run.wandb.url or "") if run.wandb else "" for run in runs],
        "folder": [str(run.folder or "") for run in runs],
    }).sort_values(["task", "method", "folder"])  # fmt: skip


def budget_table(runs: list[TaskModelResults], rows: str = "method") -> pd.DataFrame:
    """Per task, row and step budget (``trainer.max_steps``), the best grid point at that budget (as
    :func:`best_settings` picks it) with its median, min and max over seeds; only tasks run at several budgets, and
    only runs whose budget is a number of steps (not epochs, nor unrecorded)."""
    frame = run_frame(runs, rows)
    known = frame[frame["budget"].str.fullmatch("[0-9]+")]
    parts = [
        best_settings([runs[i] for i in group.index], rows).assign(steps=int(steps))
        for steps, group in known.groupby("budget")
    ]
    columns = ["task", "row", "steps", "median", "min", "max", "seeds", "grid point"]
    if not parts:
        return pd.DataFrame(columns=columns)
    table = pd.concat(parts)
    several = table.groupby("task")["steps"].transform("nunique") > 1
    return table[several].sort_values(["task", "row", "steps"])[columns].reset_index(drop=True)


def write_budget_curves(budgets: pd.DataFrame, rows: str, output: Path) -> list[Path]:
    """``budget.md``/``.csv`` and, per task, ``budget_<task>.png``: each row's median against optimizer steps (log
    scale: the budgets triple), its min-max band over seeds shaded."""
    if budgets.empty:
        return []
    import matplotlib.pyplot as plt

    written = write_markdown_and_csv(budgets.rename(columns={"row": rows}), output, "budget")
    for task, curves in budgets.groupby("task"):
        figure = budget_figure(str(task), curves)
        written.append(output / f"budget_{task}.png")
        figure.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(figure)
    return written


def budget_figure(task: str, curves: pd.DataFrame) -> Any:
    """One task's :func:`budget_table` lines as a figure: a line per row, its min-max band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for row, curve in curves.groupby("row", sort=False):
        line = axes.plot(curve["steps"], curve["median"], marker="o", label=row)[0]
        axes.fill_between(curve["steps"], curve["min"], curve["max"], color=line.get_color(), alpha=0.15)
    steps = sorted(curves["steps"].unique())
    axes.set(xscale="log", xlabel="optimizer steps", ylabel="dev score", title=f"{task}: score against budget")
    axes.set_xticks(steps, [str(step) for step in steps])
    axes.minorticks_off()  # the log scale's own minor labels (2 x 10^3, ...) would overprint the budgets
    axes.legend(fontsize=7)
    return figure


def write_plots(runs: list[TaskModelResults], output: Path) -> list[Path]:
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
    if rates := score_by_rate(runs):
        figure, axes = plt.subplots(figsize=(6, 4))
        for task, points in rates.items():
            p, median, low, high = zip(*points, strict=True)
            (line,) = axes.plot(p, median, marker="o", label=task)
            axes.fill_between(p, low, high, color=line.get_color(), alpha=0.2)
        axes.set(xlabel="replacing rate p", ylabel="dev score (median; band: lowest to highest run)",
                 title="score against replacing rate")  # fmt: skip
        axes.legend()
        written.append(output / "score_vs_rate.png")
        figure.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(figure)
    return written


def score_by_rate(runs: list[TaskModelResults]) -> dict[str, list[tuple[float, float, float, float]]]:
    """The constant-rate Theseus runs' successor scores by task and rate: ``(p, median, lowest, highest)`` over the
    runs at each ``p`` (seeds, learning rates, budgets), in order of ``p``; a run without a score is left out, and a
    task without a scored run. A line through every run would zigzag between them at each ``p``."""
    scores: dict[str, dict[float, list[float]]] = {}
    for run in runs:
        if run.method == "theseus_constant" and "replacement.p" in run.settings and run.successor.score is not None:
            at_rate = scores.setdefault(run.task, {}).setdefault(float(run.settings["replacement.p"]), [])
            at_rate.append(run.successor.score)
    return {
        task: [(p, statistics.median(values), min(values), max(values)) for p, values in sorted(by_rate.items())]
        for task, by_rate in sorted(scores.items())
    }


def unknown_rows(runs: list[TaskModelResults], rows: str) -> str | None:
    """Why ``--rows`` names something that gives no task-model run a value, as the table reads it (:func:`_row_value`);
    None when each name gives at least one run one. A misspelt name, or a results field every run holds as null
    (``base_model``) or never records (``folder``), would give each run its method's row (``no base_model (kd)``),
    not what was asked."""
    field_names = sorted(item.name for item in dataclasses.fields(TaskModelResults))
    for name in rows.split(","):
        if any(_row_value(run, name) is not None for run in runs):
            continue
        settings = sorted({key for run in runs for key in run.settings})
        valued = [other for other in [*settings, *field_names]
                  if other != name and any(_row_value(run, other) is not None for run in runs)]  # fmt: skip
        near = difflib.get_close_matches(name, valued, n=1)
        hint = f"did you mean {near[0]}?" if near else f"the settings these runs vary are {', '.join(settings)}."
        known = name.split(".")[0] in field_names or any(name in run.settings for run in runs)  # null in each
        what = "none of these runs has a value for (its rows would be the methods')" if known else \
            "is no results field or setting of these runs"  # fmt: skip
        return f"--rows names {name!r}, which {what}: {hint}"
    return None


def task_model_report(runs: list[TaskModelResults], rows: str, output: Path) -> ReportPart:
    """The task models' tables and plots: the protocol's table (a row per ``rows``, a column per task), the best
    settings, every run, the shapes, the budget curves and the replacement plots (a search's front is the report's
    own, :mod:`~theseus_pl.app.report.search_front`)."""
    tasks, table = build_table(runs, rows)
    shapes = shape_table(runs)
    written = (
        write_tables(tasks, table, rows, output)
        + write_best_settings(best_settings(runs, rows), rows, output)
        + write_markdown_and_csv(run_table(runs), output, "runs")
        + (write_markdown_and_csv(shapes, output, "shapes") if not shapes.empty else [])
        + write_budget_curves(budget_table(runs, rows), rows, output)
        + write_plots(runs, output)
    )
    return ReportPart(written, protocol_warnings(runs, rows), output / "table.md", {"tasks": tasks, "table": table})
