"""The task model's part of the W&B workspace and of a sweep's report: the dev score and loss over steps, the
successor's score against its speed-up by method and shape, the compression card, and the protocol's tables (a
search's Pareto front is the sweep report's own, for every kind a search weighs)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws

from theseus_pl.app.kinds.task_model.report import (
    best_settings,
    build_table,
    protocol_warnings,
    write_best_settings,
    write_tables,
)
from theseus_pl.app.tracking.dashboard import METHOD, Dashboard, by_method, replacing_panels

SCORE, SPEEDUP = "final/successor_score", "final/speedup"
# The run table's columns after the run's name: the headline numbers, then the values the sweep varied.
SUMMARY_COLUMNS = [SCORE, "final/predecessor_score", "final/retained", SPEEDUP, "final/best_step"]
SHAPE_SETTINGS = ["theseus.successor_layers", "theseus.successor.hidden_size", "theseus.successor.intermediate_size"]


def training_panels() -> list[Any]:
    """The dev score and the loss over steps, one line per method."""
    return [by_method("Dev score by method", "val/score"), by_method("Training loss by method", "train/loss")]


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


def _task_model_sections(replacing: ws.Section | None) -> list[ws.Section]:
    return [
        ws.Section(name="Dev score during training", is_open=True, panels=training_panels()),
        *([replacing] if replacing else []),
        ws.Section(name="Score against speed-up", is_open=True, panels=tradeoff_panels()),
        ws.Section(name="Compression card", is_open=True,
                   panels=[wr.WeavePanelSummaryTable(table_name="compression_card")]),
    ]  # fmt: skip


def _task_model_tables(runs: list[Any]) -> list[Any]:
    with tempfile.TemporaryDirectory() as folder:
        names, table = build_table(runs)
        (table_md, *_) = (p for p in write_tables(names, table, "method", Path(folder)) if p.suffix == ".md")
        best = best_settings(runs)
        (best_md, *_) = (p for p in write_best_settings(best, "method", Path(folder)) if p.suffix == ".md")
        table_text, best_text = table_md.read_text(), best_md.read_text()
    blocks = [
        wr.H2(text="Each method at its best setting (median over seeds)"), wr.MarkdownBlock(text=table_text),
        wr.H2(text="Best settings, with the seeds' spread"), wr.MarkdownBlock(text=best_text),
    ]  # fmt: skip
    return blocks


TASK_MODEL_DASHBOARD = Dashboard(
    sections=_task_model_sections,
    headline=ws.Ordering(ws.Summary(SCORE), ascending=False),
    columns=SUMMARY_COLUMNS,
    ran_on=lambda runs: sorted({run.task for run in runs}),
    tables=_task_model_tables,
    warnings=protocol_warnings,
    plots=lambda runset: [
        wr.H2(text="Training"), wr.PanelGrid(runsets=[runset], panels=training_panels() + replacing_panels()),
        wr.H2(text="Score against speed-up"), wr.PanelGrid(runsets=[runset], panels=tradeoff_panels()[:2]),
    ],
)  # fmt: skip
