"""The W&B dashboard as code: a saved workspace view of a project's runs, or a report of a finished sweep.

    python -m theseus_pl.dashboard --entity E --project P [--group G] [--sweep SWEEP_DIR] [--view-url URL]
    python -m theseus_pl.dashboard --entity E --project P --report SWEEP_DIR

The workspace has four sections: the dev score and loss over steps by method; the replacing rate p, the modules
replaced per batch and the phase switch; successor score against speed-up (by method, and by shape in parallel
coordinates, with every run's score_vs_speedup row); the compression cards. Its run table lists each run's method,
scores, speed-up and best step, best successor first. Decoder-LM and sentence-embedding runs get sections of their
own: those of the kinds the --sweep's runs are, or of every kind without --sweep. --group keeps one sweep's runs (a
multirun's W&B group is its folder's name); --sweep SWEEP_DIR takes the group from the sweep's results.json files and
adds the settings the sweep varied as columns. Without --view-url each save creates a new view (its URL is printed);
with it, that view is updated.

--report SWEEP_DIR writes a W&B report instead: the protocol's table and best settings (as python -m theseus_pl.report
computes them) and the sweep's training and score-against-speed-up plots.

Without a W&B API key (or with --dry-run) nothing is saved: the command prints what it would create.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from theseus_pl.app.config.side_commands import command_parser

VIEW_NAME = "theseus_pl"  # the workspace view's, without --name
VIEW_ONLY = ("sweep", "group", "name")  # what picks a workspace view's runs and names it: --report reads none of them


def main(argv: Sequence[str] | None = None) -> Any:
    """Build the workspace (or report), then save it, or print what saving would create; returns the object."""
    parser = command_parser("dashboard", __doc__, dry_run="print what would be created; save nothing")
    parser.add_argument("--entity", required=True, help="the W&B user or team that owns the project")
    parser.add_argument("--project", required=True, help="the W&B project the runs logged to (logger.wandb.project)")
    parser.add_argument("--group", help="only this W&B group's runs (a multirun's: its folder's name)")
    parser.add_argument(
        "--sweep", type=Path, metavar="SWEEP_DIR", help="a multirun folder: its group and the settings it varied"
    )
    parser.add_argument("--name", help=f"the workspace view's name (default: {VIEW_NAME})")
    parser.add_argument("--view-url", help="update this saved view (https://wandb.ai/E/P?nw=...) instead of adding one")
    parser.add_argument("--report", type=Path, metavar="SWEEP_DIR", help="write a report of this finished sweep")
    args = parser.parse_args(argv)
    if args.view_url is not None and (problem := view_url_problem(args.view_url, args.entity, args.project)):
        parser.error(problem)
    if args.view_url is not None and args.report is not None:
        parser.error("--view-url updates a saved workspace view; --report writes a report. Give one of them.")
    view_only = [f"--{name}" for name in VIEW_ONLY if getattr(args, name) is not None]
    if args.report is not None and view_only:
        parser.error(f"{', '.join(view_only)}: for a workspace view; --report writes a report of the runs under its "
                     "SWEEP_DIR, plotted from their own W&B groups. Give one of them.")  # fmt: skip
    # The records' readers and W&B's workspace API (torch, through the kinds) once the command line is read: --help
    # and a refused option answer at once.
    from theseus_pl.app.report.tables import find_records, no_results
    from theseus_pl.app.results.envelope import UnknownKind
    from theseus_pl.app.results.registry import parts
    from theseus_pl.app.tracking.dashboard import (
        dashboard_parts,
        describe,
        sweep_groups,
        sweep_report,
        swept_settings,
        workspace,
    )
    from theseus_pl.app.tracking.loggers import wandb_mode

    folder = args.report or args.sweep
    runs = []
    if folder is not None:
        try:
            runs, _ = find_records([folder])
        except FileNotFoundError as error:
            parser.error(str(error))
        if not runs:
            parser.error(str(no_results([folder], "the folder of a finished sweep (a multirun folder)")))
    if args.report is not None:
        try:
            item = sweep_report(args.entity, args.project, args.report, runs)
        except UnknownKind as error:  # a kind the report has no tables for
            parser.error(str(error))
    else:
        kinds = sorted({run.kind for run in runs}) or list(parts("dashboard"))  # no runs: sections for every kind
        try:
            dashboard_parts(kinds)
        except UnknownKind as error:  # a kind the workspace has no sections for
            parser.error(str(error))
        groups = sweep_groups(runs)
        if args.group is None and len(groups) > 1:
            parser.error(f"the runs under {args.sweep} logged to several W&B groups ({', '.join(groups)}): pick one "
                         "with --group.")  # fmt: skip
        group = args.group or next(iter(groups), None)
        name = VIEW_NAME if args.name is None else args.name
        item = workspace(args.entity, args.project, name, group, swept_settings(runs) if runs else (), kinds)

    online = wandb_mode() == "online"
    if args.dry_run or not online:
        why = "--dry-run" if args.dry_run else "W&B is not online here: wandb login or WANDB_API_KEY, no WANDB_MODE"
        action = f"replace the sections and settings of the saved view {args.view_url} with" if args.view_url else (
            "create"
        )  # fmt: skip
        print("\n".join([f"Not saved ({why}). Saving would {action}:", *describe(item)]))
        return item
    try:
        save(item, args.view_url)
    except Exception as error:  # W&B's own refusal (no such view, no access, no network): one line, not a traceback
        parser.error(f"W&B did not save it: {type(error).__name__}: {error}")
    return item


def view_url_problem(url: str, entity: str, project: str) -> str | None:
    """Why ``url`` is not a saved workspace view of ``entity``/``project`` (``https://wandb.ai/E/P?nw=ID``, as W&B's
    address bar shows it); None when it is. Checked before anything is built: W&B's parser raised on any other."""
    parsed = urlparse(url)
    parts = parsed.path.strip("/").split("/")
    view = parse_qs(parsed.query).get("nw")
    if parsed.scheme not in ("http", "https") or len(parts) != 2 or not view:
        return f"--view-url {url} is no saved workspace view: give its address, https://wandb.ai/ENTITY/PROJECT?nw=ID."
    if parts != [entity, project]:
        return f"--view-url {url} is a view of {parts[0]}/{parts[1]}, not of --entity {entity} --project {project}."
    return None


def save(item: Any, view_url: str | None) -> None:
    """Save to W&B (``view_url``: replace that workspace view's sections and settings) and print where it is."""
    import wandb_workspaces.workspaces as ws

    if view_url and isinstance(item, ws.Workspace):
        saved = ws.Workspace.from_url(view_url)
        saved.sections, saved.settings, saved.runset_settings = item.sections, item.settings, item.runset_settings
        item = saved
    item.save()
    print(f"Saved: {item.url}")


def cli() -> None:
    """The ``theseus-pl-dashboard`` command."""
    main()


if __name__ == "__main__":
    cli()
