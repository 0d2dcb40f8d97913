"""The project's W&B dashboard as code: a saved workspace view and, for a finished sweep, a report.

Built with ``wandb-workspaces`` (W&B's own library for saved views and reports) from what every job logs (see
:mod:`theseus_pl.app.tracking.wandb_run`): ``val/score`` (``val/perplexity`` for a decoder LM, ``val/cosine`` to the
teacher's vectors beside it for a sentence-embedding model) and ``train/*`` over
``trainer/global_step``, the ``final/*`` summary, the ``compression_card``, ``score_vs_speedup`` and
``generation_sample`` tables. A run's method is its W&B job type
(:mod:`theseus_pl.app.tracking.run_identity`), so panels group by ``JobType``. The objects are built offline; only
saving them needs W&B.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws
from wandb_workspaces.expr import And

from theseus_pl.app.config.kinds import TASK_MODEL
from theseus_pl.app.report.files import markdown_table
from theseus_pl.app.report.search_front import search_front_table
from theseus_pl.app.report.tables import (
    varied_keys,
)
from theseus_pl.app.results.envelope import RunRecord, UnknownKind, by_kind
from theseus_pl.app.results.registry import parts

STEP = "trainer/global_step"
METHOD = "JobType"  # each run's job type is its method (theseus_curriculum, kd, ...)


def by_method(title: str, key: str) -> Any:
    """``key`` over the steps, one line per method: the runs' mean, shaded between the lowest and highest run."""
    return wr.LinePlot(title=title, x=STEP, y=[key], groupby=METHOD, groupby_aggfunc="mean", groupby_rangefunc="minmax")


def replacing_panels() -> list[Any]:
    """The replacing rate ``p``, the modules replaced per batch and the phase (1: replacing, 2: successor
    fine-tuning: its switch is where the line steps up)."""
    return [
        wr.LinePlot(title="Replacing rate p", x=STEP, y=["train/p"]),
        wr.LinePlot(title="Modules replaced per batch", x=STEP, y=["train/replaced_modules"]),
        wr.LinePlot(title="Phase (2 from the switch to successor fine-tuning)", x=STEP, y=["train/phase"]),
    ]


def config_column(key: str) -> str:
    """The run table's column of a dotted config key: W&B stores a nested config under ``<first>.value``."""
    first, _, rest = key.partition(".")
    return f"config:{first}.value" + (f".{rest}" if rest else "")


@dataclass(frozen=True)
class Dashboard:
    """A kind's part of the saved workspace and of a sweep's report, as the kind registers it
    (:mod:`~theseus_pl.app.results.registry`): the parts of the kinds shown follow each other in the registry's order,
    and the first one's headline orders the run table."""

    # Its workspace sections, given the shared Replacing section where no kind before it has shown one (else None).
    sections: Callable[[ws.Section | None], list[ws.Section]]
    headline: ws.Ordering  # the run table's order where it is the first kind shown
    columns: list[str]  # the summary keys pinned in the run table
    ran_on: Callable[[list[Any]], list[str]]  # what its runs ran on, in words, for the report's first line
    tables: Callable[[list[Any]], list[Any]]  # the report's blocks of its tables, from its records
    plots: Callable[[Any], list[Any]]  # the report's blocks of its plots over the runset of the sweep's W&B group
    # What makes its tables' rows incomparable, in the words python -m theseus_pl.report warns in (none: nothing)
    warnings: Callable[[list[Any]], list[str]] = lambda runs: []


def dashboard_parts(kinds: Iterable[str]) -> dict[str, Dashboard]:
    """The dashboards of ``kinds``, in the registry's order; a kind with none is refused in one line
    (:class:`~theseus_pl.app.results.envelope.UnknownKind`): a view that silently lacked a kind's runs would look
    like a project without them."""
    known, wanted = parts("dashboard"), set(kinds)
    if unknown := sorted(wanted - set(known)):
        raise UnknownKind(f"The dashboard has no sections for runs of kind {', '.join(map(repr, unknown))}; it knows "
                          f"runs of kind {', '.join(map(repr, known))} only.")  # fmt: skip
    return {kind: part() for kind, part in known.items() if kind in wanted}


def workspace(
    entity: str,
    project: str,
    name: str = "theseus_pl",
    group: str | None = None,
    swept: Sequence[str] = (),
    kinds: Sequence[str] = (TASK_MODEL,),
) -> ws.Workspace:
    """The saved view over the runs of ``group`` (all the project's when None), the ``swept`` settings as columns:
    each kind's sections (:class:`Dashboard`), the Replacing section once, the run table ordered by the first kind's
    headline (the best successor first). A kind it has no sections for is refused in one line
    (:class:`~theseus_pl.app.results.envelope.UnknownKind`) rather than given a view without them."""
    shown = dashboard_parts(kinds)
    replacing: ws.Section | None = ws.Section(name="Replacing", is_open=True, panels=replacing_panels())
    sections = []
    for part in shown.values():
        sections += part.sections(replacing)
        replacing = None  # shown once, by the first kind
    runs = ws.RunsetSettings(
        filters=And(ws.Metric("Group") == group) if group else "",  # (a plain list is deprecated)
        order=[next(iter(shown.values())).headline],
        pinned_columns=["run:jobType", *(f"summary:{key}" for part in shown.values() for key in part.columns),
                        *map(config_column, swept)],
    )  # fmt: skip
    return ws.Workspace(entity=entity, project=project, name=name, sections=sections, runset_settings=runs,
                        settings=ws.WorkspaceSettings(x_axis=STEP, max_runs=100))  # fmt: skip


def sweep_groups(runs: Sequence[RunRecord]) -> list[str]:
    """The W&B groups the runs logged to (a multirun's jobs share one: its folder's name)."""
    return sorted({run.wandb.group for run in runs if run.wandb is not None and run.wandb.group})


def swept_settings(runs: Sequence[RunRecord]) -> list[str]:
    """The settings whose values differ between the runs: the sweep's axes."""
    return varied_keys([run.settings for run in runs])


def sweep_report(entity: str, project: str, sweep: Path, runs: Sequence[RunRecord]) -> wr.Report:
    """The sweep's report: the tables ``python -m theseus_pl.report`` writes (the protocol's table and best settings
    for task-model runs, the LM table for decoder-LM runs, the embedding table for sentence-embedding runs, a search's
    front) with the warnings it prints beside them (a table without them read as a fair comparison) and,
    where the runs logged to W&B, the plots of their group: each kind's by its :class:`Dashboard`."""
    dashboards = parts("dashboard")
    parted = {kind: found for kind, found in by_kind(runs, dashboards, "the sweep's W&B report").items() if found}
    shown = {kind: dashboards[kind]() for kind in parted}
    methods = sorted({run.method for run in runs})
    on = [words for kind, part in shown.items() for words in part.ran_on(parted[kind])]
    blocks: list[Any] = [
        wr.P(text=f"{len(runs)} runs of the sweep {sweep.name}: {', '.join(methods)} on {', '.join(on)}. Written by "
                  "python -m theseus_pl.dashboard."),
    ]  # fmt: skip
    for kind, part in shown.items():
        blocks += part.tables(parted[kind])
    if warnings := [warning for kind, part in shown.items() for warning in part.warnings(parted[kind])]:
        blocks += [wr.H2(text="What makes these rows incomparable (the warnings of python -m theseus_pl.report)"),
                   wr.MarkdownBlock(text="\n".join(f"- {warning}" for warning in warnings))]  # fmt: skip
    front = search_front_table(runs)  # a search's sweep, of any kind it weighs: its front, from the pick's record
    if not front.empty:
        blocks += [wr.H2(text="The search's front: dev score against ms a call, fastest first"),
                   wr.MarkdownBlock(text=markdown_table(front))]  # fmt: skip
    if groups := sweep_groups(runs):
        runset = wr.Runset(entity=entity, project=project, name=sweep.name, filters=f"Group in {groups!r}")
        for part in shown.values():
            blocks += part.plots(runset)
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
