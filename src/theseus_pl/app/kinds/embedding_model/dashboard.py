"""The sentence-embedding kind's part of the W&B workspace and of a sweep's report: held-out cosine to the teacher over
steps, STS-B against speed-up, and its table."""

from __future__ import annotations

from typing import Any

import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws

from theseus_pl.app.kinds.embedding_model.report import embedding_model_table, embedding_model_warnings
from theseus_pl.app.report.files import markdown_table
from theseus_pl.app.tracking.dashboard import METHOD, Dashboard, by_method, replacing_panels

STS, BATCH1_SPEEDUP = "final/successor_sts", "final/batch1_speedup"  # a sentence-embedding run's summary


EMBEDDING_COLUMNS = [STS, "final/predecessor_sts", "final/retained", "final/cosine", BATCH1_SPEEDUP,
                     "final/batch32_speedup"]  # fmt: skip


def embedding_panels() -> list[Any]:
    """A sentence-embedding run's held-out cosine to its teacher's vectors (what its checkpoints are chosen on) and its
    loss, the MSE to those vectors, over steps, one line per method."""
    return [
        by_method("Held-out cosine to the teacher by method", "val/cosine"),
        by_method("Training loss by method", "train/loss"),
    ]


def embedding_tradeoff_panels() -> list[Any]:
    """Where each sentence-embedding run lands: successor STS-B dev Spearman against its speed-up at batch 1 (left out
    of the summary where the machine was busy), and by method."""
    return [
        wr.ScatterPlot(title="Successor STS-B against batch-1 speed-up", x=wr.SummaryMetric(BATCH1_SPEEDUP),
                       y=wr.SummaryMetric(STS)),
        wr.BarPlot(title="Successor STS-B by method", metrics=[STS], groupby=METHOD, groupby_aggfunc="median",
                   groupby_rangefunc="minmax"),
    ]  # fmt: skip


def _embedding_model_sections(replacing: ws.Section | None) -> list[ws.Section]:
    return [
        ws.Section(name="Sentence embeddings: held-out cosine to the teacher during training", is_open=True,
                   panels=embedding_panels()),
        *([replacing] if replacing else []),
        ws.Section(name="Sentence embeddings: STS-B against speed-up", is_open=True,
                   panels=embedding_tradeoff_panels()),
    ]  # fmt: skip


def _embedding_model_tables(runs: list[Any]) -> list[Any]:
    return [
        wr.H2(text="Sentence embeddings: STS-B dev and fidelity to the teacher, a line per run"),
        wr.MarkdownBlock(text=markdown_table(embedding_model_table(runs))),
    ]


EMBEDDING_MODEL_DASHBOARD = Dashboard(
    sections=_embedding_model_sections,
    headline=ws.Ordering(ws.Summary(STS), ascending=False),
    columns=EMBEDDING_COLUMNS,
    ran_on=lambda runs: ["sentences (STS-B dev)"],
    tables=_embedding_model_tables,
    warnings=embedding_model_warnings,
    plots=lambda runset: [wr.H2(text="Sentence embeddings"), wr.PanelGrid(runsets=[runset], panels=[
        *embedding_panels(), *replacing_panels()[:1], *embedding_tradeoff_panels()])],
)  # fmt: skip
