"""The decoder LM's part of the W&B workspace and of a sweep's report: held-out perplexity over steps, perplexity
against decode speed-up with its generation sample, its GGUF files in llama.cpp, and its table."""

from __future__ import annotations

from typing import Any

import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws

from theseus_pl.app.kinds.language_model.report import (
    language_model_frame,
    language_model_table,
    language_model_warnings,
)
from theseus_pl.app.report.files import markdown_table
from theseus_pl.app.tracking.dashboard import METHOD, Dashboard, by_method, replacing_panels
from theseus_pl.deployment.gguf_types import GGUF_TYPES

PERPLEXITY, DECODE_SPEEDUP = "final/successor_perplexity", "final/decode_speedup"  # a decoder-LM run's summary
LM_COLUMNS = [PERPLEXITY, "final/predecessor_perplexity", "final/kl", "final/agreement", DECODE_SPEEDUP]


def language_model_panels() -> list[Any]:
    """A decoder-LM run's held-out perplexity (what its validation logs) and loss over steps, one line per method."""
    return [
        by_method("Held-out perplexity by method", "val/perplexity"),
        by_method("Training loss by method", "train/loss"),
    ]


def language_model_tradeoff_panels() -> list[Any]:
    """Where each decoder-LM run lands: successor perplexity against decode speed-up, by method, and its sample."""
    return [
        wr.ScatterPlot(title="Successor perplexity against decode speed-up", x=wr.SummaryMetric(DECODE_SPEEDUP),
                       y=wr.SummaryMetric(PERPLEXITY)),
        wr.BarPlot(title="Successor perplexity by method", metrics=[PERPLEXITY], groupby=METHOD,
                   groupby_aggfunc="median", groupby_rangefunc="minmax"),
        wr.WeavePanelSummaryTable(table_name="generation_sample"),
    ]  # fmt: skip


def gguf_panels() -> list[Any]:
    """The successors as GGUF files (``deploy.gguf``), a bar per type a run wrote: each file's decode speed-up over the
    predecessor's file in llama.cpp (left out of the summary where the machine was busy), its perplexity there, and
    its size."""

    def by_type(title: str, name: str) -> Any:
        return wr.BarPlot(title=title, metrics=[f"final/gguf_{kind}_{name}" for kind in GGUF_TYPES], groupby=METHOD,
                          groupby_aggfunc="median", groupby_rangefunc="minmax")  # fmt: skip

    return [
        by_type("llama.cpp decode speed-up by GGUF type", "llama_cpp_decode_speedup"),
        by_type("Perplexity in llama.cpp by GGUF type", "llama_cpp_successor_perplexity"),
        by_type("GGUF file size (MiB) by type", "mib"),
    ]


def _language_model_sections(replacing: ws.Section | None) -> list[ws.Section]:
    return [
        ws.Section(name="Decoder LMs: held-out perplexity during training", is_open=True,
                   panels=language_model_panels()),
        *([replacing] if replacing else []),
        ws.Section(name="Decoder LMs: perplexity against decode speed-up", is_open=True,
                   panels=language_model_tradeoff_panels()),
        ws.Section(name="Decoder LMs: shipped as GGUF for llama.cpp", is_open=True, panels=gguf_panels()),
    ]  # fmt: skip


def _language_model_tables(runs: list[Any]) -> list[Any]:
    return [
        wr.H2(text="Decoder LMs: held-out perplexity per method and kept layers (over seeds)"),
        wr.MarkdownBlock(text=markdown_table(language_model_table(language_model_frame(runs)))),
    ]


LANGUAGE_MODEL_DASHBOARD = Dashboard(
    sections=_language_model_sections,
    headline=ws.Ordering(ws.Summary(PERPLEXITY), ascending=True),
    columns=LM_COLUMNS,
    ran_on=lambda runs: ["language-model text"],
    tables=_language_model_tables,
    warnings=lambda runs: language_model_warnings(language_model_frame(runs)),
    plots=lambda runset: [wr.H2(text="Decoder LMs"), wr.PanelGrid(runsets=[runset], panels=[
        *language_model_panels(), *replacing_panels()[:1], *language_model_tradeoff_panels()[:2]])],
)  # fmt: skip
