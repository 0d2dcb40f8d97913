"""The project's W&B dashboard as code: a saved workspace view and, for a finished sweep, a report.

Built with ``wandb-workspaces`` (W&B's own library for saved views and reports) from what every job logs (see
:mod:`theseus_pl.app.tracking.wandb_run`): ``val/score`` and ``train/*`` over ``trainer/global_step``, the ``final/*``
summary, the ``compression_card`` and ``score_vs_speedup`` tables. A run's method is its W&B job type
(:mod:`theseus_pl.app.tracking.run_identity`), so panels group by ``JobType``. The objects are built offline; only
saving them needs W&B.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws

from theseus_pl.app.report.tables import best_settings, build_table, varied_keys, write_best_settings, write_tables
from theseus_pl.app.results.task_model import RunResults

STEP = "trainer/global_step"
METHOD = "JobType"  # each run's job type is its method (theseus_curriculum, kd, ...)
SCORE, SPEEDUP = "final/successor_score", "final/speedup"
# The run table's columns after the run's name: the headline numbers, then the values the sweep varied.
SUMMARY_COLUMNS = [SCORE, "final/predecessor_score", "final/retained", SPEEDUP, "final/best_step"]
SHAPE_SETTINGS = ["theseus.successor_layers", "theseus.successor.hidden_size", "theseus.successor.intermediate_size"]


def training_panels() -> list[Any]:
    """The dev score and the loss over steps, one line per method (mean, with the runs' range)."""
    return [
        wr.LinePlot(title="Dev score by method", x=STEP, y=["val/score"], groupby=METHOD,
                    groupby_aggfunc="mean", groupby_rangefunc="minmax"),
        wr.LinePlot(title="Training loss by method", x=STEP, y=["train/loss"], groupby=METHOD,
                    groupby_aggfunc="mean", groupby_rangefunc="minmax"),
    ]  # fmt: skip


def replacing_panels() -> list[Any]:
    """The replacing rate ``p``, the modules replaced per batch and the phase (1: replacing, 2: successor
    fine-tuning: its switch is where the line steps up)."""
    return [
        wr.LinePlot(title="Replacing rate p", x=STEP, y=["train/p"]),
        wr.LinePlot(title="Modules replaced per batch", x=STEP, y=["train/replaced_modules"]),
        wr.LinePlot(title="Phase (2 from the switch to successor fine-tuning)", x=STEP, y=["train/phase"]),
    ]


def tradeoff_panels() -> list[Any]:
    """Where each run lands: successor score against speed-up, by method and by shape."""
    return [
        wr.ScatterPlot(title="Successor score against speed-up", x=wr.SummaryMetric(SPEEDUP),
                       y=wr.SummaryMetric(SCORE)),
        wr.BarPlot(title="Successor score by method", metrics=[SCORE], groupby=METHOD, groupby_aggfunc="median",
                   groupby_rangefunc="minmax"),
        wr.ParallelCoordinatesPlot(title="Shape, speed-up and score", columns=[
            *(wr.ParallelCoordinatesPlotColumn(metric=wr.Config(key)) for key in SHAPE_SETTINGS),
            wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric(SPEEDUP)),
            wr.ParallelCoordinatesPlotColumn(metric=wr.SummaryMetric(SCORE)),
        ]),
        wr.WeavePanelSummaryTable(table_name="score_vs_speedup"),
    ]  # fmt: skip


def config_column(key: str) -> str:
    """The run table's column of a dotted config key: W&B stores a nested config under ``<first>.value``."""
    first, _, rest = key.partition(".")
    return f"config:{first}.value" + (f".{rest}" if rest else "")


def workspace(
    entity: str, project: str, name: str = "theseus_pl", group: str | None = None, swept: Sequence[str] = ()
) -> ws.Workspace:
    """The saved view: four sections (training, replacing, score against speed-up, compression card) over the runs
    of ``group`` (all the project's when None), the best successor first, the ``swept`` settings as columns."""
    sections = [
        ws.Section(name="Dev score during training", is_open=True, panels=training_panels()),
        ws.Section(name="Replacing", is_open=True, panels=replacing_panels()),
        ws.Section(name="Score against speed-up", is_open=True, panels=tradeoff_panels()),
        ws.Section(name="Compression card", is_open=True,
                   panels=[wr.WeavePanelSummaryTable(table_name="compression_card")]),
    ]  # fmt: skip
    runs = ws.RunsetSettings(
        filters=[ws.Metric("Group") == group] if group else [],
        order=[ws.Ordering(ws.Summary(SCORE), ascending=False)],
        pinned_columns=["run:jobType", *(f"summary:{key}" for key in SUMMARY_COLUMNS), *map(config_column, swept)],
    )
    return ws.Workspace(entity=entity, project=project, name=name, sections=sections, runset_settings=runs,
                        settings=ws.WorkspaceSettings(x_axis=STEP, max_runs=100))  # fmt: skip


def sweep_groups(runs: Sequence[RunResults]) -> list[str]:
    """The W&B groups the runs logged to (a multirun's jobs share one: its folder's name)."""
    return sorted({run.wandb.group for run in runs if run.wandb is not None and run.wandb.group})


def swept_settings(runs: Sequence[RunResults]) -> list[str]:
    """The settings whose values differ between the runs: the sweep's axes."""
    return varied_keys([run.settings for run in runs])


def sweep_report(entity: str, project: str, sweep: Path, runs: Sequence[RunResults]) -> wr.Report:
    """The sweep's report: the protocol's table and best settings (as ``python -m theseus_pl.report`` writes them)
    and, where the runs logged to W&B, the training and score-against-speed-up plots of their group."""
    with tempfile.TemporaryDirectory() as folder:
        tasks, table = build_table(list(runs))
        (table_md, *_) = (p for p in write_tables(tasks, table, "method", Path(folder)) if p.suffix == ".md")
        best = best_settings(list(runs))
        (best_md, *_) = (p for p in write_best_settings(best, "method", Path(folder)) if p.suffix == ".md")
        table_text, best_text = table_md.read_text(), best_md.read_text()
    methods = sorted({run.method for run in runs})
    blocks: list[Any] = [
        wr.P(text=f"{len(runs)} runs of the sweep {sweep.name}: {', '.join(methods)} on "
                  f"{', '.join(sorted({run.task for run in runs}))}. Written by python -m theseus_pl.dashboard."),
        wr.H2(text="Each method at its best setting (median over seeds)"), wr.MarkdownBlock(text=table_text),
        wr.H2(text="Best settings, with the seeds' spread"), wr.MarkdownBlock(text=best_text),
    ]  # fmt: skip
    if groups := sweep_groups(runs):
        runset = wr.Runset(entity=entity, project=project, name=sweep.name, filters=f"Group in {groups!r}")
        blocks += [
            wr.H2(text="Training"), wr.PanelGrid(runsets=[runset], panels=training_panels() + replacing_panels()),
            wr.H2(text="Score against speed-up"), wr.PanelGrid(runsets=[runset], panels=tradeoff_panels()[:2]),
        ]  # fmt: skip
    return wr.Report(entity=entity, project=project, title=f"theseus_pl sweep {sweep.name}", blocks=blocks,
                     description=f"{len(runs)} runs; tables from results.json, plots from the W&B group.")  # fmt: skip


def describe(item: ws.Workspace | wr.Report) -> list[str]:
    """What saving ``item`` would create, in lines: its sections or blocks and their panels."""
    if isinstance(item, ws.Workspace):
        filters = item.runset_settings.filters or "every run"
        lines = [f"Workspace view {item.name!r} in {item.entity}/{item.project} ({filters})"]
        for section in item.sections:
            lines.append(f"  section {section.name!r}")
            lines += [f"    {_panel_words(panel)}" for panel in section.panels]
        return [*lines, "  run table columns: " + ", ".join(item.runset_settings.pinned_columns)]
    lines = [f"Report {item.title!r} in {item.entity}/{item.project}"]
    for block in item.blocks:
        if isinstance(block, wr.PanelGrid):
            lines += [f"    {_panel_words(panel)}" for panel in block.panels]
        else:
            text = str(getattr(block, "text", ""))
            lines.append(f"  {type(block).__name__}: {text.splitlines()[0] if text else ''}")
    return lines


def _panel_words(panel: Any) -> str:
    title = getattr(panel, "title", None) or getattr(panel, "table_name", None)
    return f"{type(panel).__name__} {title!r}"
