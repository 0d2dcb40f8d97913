"""The paper's Table 2 runs on a GPU node without network, prepared on a connected machine as one pack.

    python -m theseus_pl.offline pack OUT [--model mpnet_base] [--glue-dir PATH] [--tasks RTE CoLA STS-B SST-2]
                                      [--python 3.12] [--piece-mb 64] [--wheel SPEC ...]
    (copy OUT's pieces, pieces.sha256 and unpack.sh to the node; there:)
    bash unpack.sh DEST
    python -m theseus_pl.offline run DEST --output DEST/runs [--tasks ...] [--seeds 1 2 3] [--grid paper|first]
                                     [--steps-to-full N ...] [--baseline-inits [bottom every_other]]
                                     [--baselines fine_tuning kd] [--jobs 16] [--minutes M] [-- OVERRIDE ...]

``pack`` writes the wheels the node lacks (for its Python; ``--wheel`` replaces the list), this project as a wheel,
the base model's weights in fp16 and the GLUE task folders, as one tar file cut into pieces of ``--piece-mb``, with
their checksums and ``unpack.sh``, which checks, joins, unpacks and installs them offline
(:mod:`~theseus_pl.app.ship.offline_pack`). ``run`` starts, for each task, Theseus on the grid and the baselines at
the same steps and seeds as Hydra multiruns side by side (:mod:`~theseus_pl.app.run.paper_grid`), each job on the
GPU (``trainer=gpu``, bf16) or, with ``-- trainer=cpu``, on the CPU; stops what still runs after ``--minutes``; and
writes the report (``python -m theseus_pl.report``) into ``<output>/report``: ``table.md`` (per method, its start
and task, the best grid point's median over seeds), ``best_settings.md`` and ``runs.md``.
``--dry-run`` prints what ``pack`` would put in the pack, or the command lines ``run`` would start.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from hydra.errors import HydraException

from theseus_pl.app.config.side_commands import command_parser, count_of, refuse
from theseus_pl.app.run.paper_grid import BASELINE_INITS, BASELINES, GRIDS, paper_experiment

DEFAULT_TASKS = ("RTE", "CoLA", "STS-B", "SST-2")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = command_parser("offline", __doc__, "print what would be packed, or the command lines a run starts")
    commands = parser.add_subparsers(dest="command", required=True)
    pack = commands.add_parser("pack", help="write the pack for a node without network")
    pack.add_argument("--dry-run", action="store_true", dest="dry_run_here", help="print what would be packed")
    pack.add_argument("output", type=Path, help="a new folder for the pieces")
    pack.add_argument("--model", default="mpnet_base", help="a model option (conf/model/) or a model folder")
    pack.add_argument("--glue-dir", type=Path, default=Path("../shared/data/glue"), help="the GLUE folder")
    pack.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS), help="GLUE task folders to pack")
    pack.add_argument("--python", default="3.12", help="the node's Python version (its wheels' tags)")
    pack.add_argument("--piece-mb", type=_piece_size, default=64.0, help="the largest piece, in MiB")
    pack.add_argument("--wheel", nargs="*", help="the packages the node lacks (default: what a PyTorch image lacks)")
    run = commands.add_parser("run", help="run the grid on the node, then write the report")
    run.add_argument("--dry-run", action="store_true", dest="dry_run_here", help="print the command lines")
    run.add_argument("unpacked", type=Path, help="the folder unpack.sh unpacked into")
    run.add_argument("--output", type=Path, required=True, help="the folder the multiruns and report go into")
    run.add_argument("--tasks", nargs="+", help="a part of the pack's tasks (default: all)")
    run.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="seeds of every grid point")
    run.add_argument("--grid", choices=GRIDS, default="paper", help="the paper's grid, or its first point")
    run.add_argument(
        "--steps-to-full", nargs="+", type=int, help="replacing steps of every run, in place of the grid's"
    )
    run.add_argument(
        "--baseline-inits",
        nargs="*",
        choices=BASELINE_INITS,
        default=list(BASELINE_INITS),
        help="the baselines' starts (default both; none given: Theseus alone)",
    )
    run.add_argument(
        "--baselines",
        nargs="+",
        choices=BASELINES,
        default=list(BASELINES),
        help="the methods Theseus is set against (default both)",
    )
    run.add_argument("--jobs", type=count_of("count of jobs"), default=16, help="jobs at once, over every multirun")
    run.add_argument("--minutes", type=_minutes, help="stop what still runs after this long (its finished jobs count)")
    args = parser.parse_args(argv)
    args.dry_run = args.dry_run or args.dry_run_here  # before the command's name or after it
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.command == "pack":
        _pack(args)
    else:
        _run(args, overrides)


def _piece_size(text: str) -> float:
    """``--piece-mb``: a size in MiB of at least one byte (a piece of none would pack nothing)."""
    try:
        mib = float(text)
    except ValueError:
        mib = 0.0
    if not (math.isfinite(mib) and mib * 2**20 >= 1):
        raise argparse.ArgumentTypeError(f"{text!r} is no size of a piece: a number of MiB above 0, e.g. 64")
    return mib


def _minutes(text: str) -> float:
    """``--minutes``: a deadline after the start (one at or before it would stop every job as it starts)."""
    try:
        minutes = float(text)
    except ValueError:
        minutes = 0.0
    if not (math.isfinite(minutes) and minutes > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is no deadline: a number of minutes above 0, e.g. 8")
    return minutes


def _pack(args: argparse.Namespace) -> None:
    from theseus_pl.app.ship.offline_pack import (
        NODE_WHEELS,
        PackRecord,
        build_pack,
        glue_tasks_problem,
        pack_folder_problem,
    )
    from theseus_pl.core.io import model_files_problem

    try:  # a task the node could not run is refused here, not there
        for task in args.tasks:
            paper_experiment(task)
    except ValueError as error:
        refuse(f"--tasks: {error}")
    # before the model is found: --dry-run refuses them too
    if problem := glue_tasks_problem(args.glue_dir, args.tasks) or pack_folder_problem(args.output):
        refuse(problem)
    model_dir, hub_id = _model_folder(args.model)
    if problem := model_files_problem(model_dir):  # each job on the node would fail, or train on unknown tokens
        refuse(f"--model {args.model}: {problem}")
    project_root = Path(__file__).resolve().parents[2]
    if not (project_root / "pyproject.toml").is_file():
        refuse("pack builds this project's wheel from its source checkout: run it from a clone of the repository.")
    wheels = list(NODE_WHEELS) if args.wheel is None else args.wheel  # --wheel alone: none but this project's
    if args.dry_run:
        print(f"Would pack into {args.output}, in pieces of {args.piece_mb:g} MiB: {model_dir} in fp16"
              f"{f' ({hub_id})' if hub_id else ''}, GLUE {', '.join(args.tasks)} from {args.glue_dir}, wheels for "
              f"Python {args.python}: {', '.join([*wheels, 'theseus_pl'])}.")  # fmt: skip
        return
    try:
        pieces = build_pack(args.output, model_dir, args.glue_dir, args.tasks, args.python, wheels,
                            project_root, args.piece_mb, PackRecord(tasks=args.tasks, hub_id=hub_id))  # fmt: skip
    except ValueError as error:
        refuse(str(error))
    size = sum(piece.stat().st_size for piece in pieces) / 2**20
    print(f"Packed {len(pieces)} pieces ({size:.0f} MiB) into {args.output}. On the node: "
          "bash unpack.sh DEST && python3 -m theseus_pl.offline run DEST --output DEST/runs")  # fmt: skip


def _model_folder(model: str) -> tuple[Path, str | None]:
    """The folder of ``model`` (a model option of conf/model/, resolved as a run resolves it, or a folder) and the
    hub id the model card names."""
    if Path(model).is_dir():
        return Path(model), None
    from hydra import compose, initialize_config_module
    from omegaconf.errors import InterpolationResolutionError

    from theseus_pl.app.config.resolvers import register_resolvers, resolution_problem

    register_resolvers()
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        try:
            cfg = compose("train", overrides=[f"model={model}", "paths.output_dir=unused"])
            folder = Path(cfg.model.predecessor or cfg.model.base)
        except InterpolationResolutionError as error:
            refuse(f"--model {model}: {resolution_problem(error)}")
        except Exception as error:  # Hydra's missing-option error
            refuse(f"--model {model}: no model option or folder of that name ({type(error).__name__}).")
    if not folder.is_dir():
        refuse(f"--model {model} names {folder}, which is no local folder: pack a model that is on this machine.")
    return folder, cfg.model.get("hub_id")


def _run(args: argparse.Namespace, overrides: list[str]) -> None:
    from dataclasses import replace

    from theseus_pl.app.config.resolvers import register_resolvers
    from theseus_pl.app.report.tables import report_command
    from theseus_pl.app.results.envelope import ResultsError
    from theseus_pl.app.run.paper_grid import grid_named, multirun_commands, run_side_by_side
    from theseus_pl.app.ship.offline_pack import read_pack_record

    register_resolvers()  # the jobs' settings are composed here, as each job composes them

    try:
        record = read_pack_record(args.unpacked)
    except ResultsError as error:
        refuse(str(error))
    tasks = args.tasks or record.tasks
    missing = [task for task in tasks if task not in record.tasks]
    if missing:
        refuse(f"--tasks {' '.join(missing)}: the pack holds {', '.join(record.tasks)} only.")
    extra = [*(["trainer=gpu"] if not any(o.startswith("trainer=") for o in overrides) else []), *overrides]
    if record.hub_id:
        extra.append(f"model.hub_id={record.hub_id}")
    grid = grid_named(args.grid)
    if args.steps_to_full:
        grid = replace(grid, steps_to_full=tuple(args.steps_to_full))
    try:
        unpacked = args.unpacked.resolve()
        commands = multirun_commands(unpacked / "model", unpacked / "glue", args.output.resolve(), tasks,
                                     args.seeds, grid, args.jobs, extra,
                                     baseline_inits=args.baseline_inits, baseline_methods=args.baselines)  # fmt: skip
    except ValueError as error:
        refuse(str(error))
    refusals = [problem for command in commands.values() for problem in _job_refusals(command)]
    if refusals:
        refuse("no job was started; the grid's jobs would be refused:\n- " + "\n- ".join(refusals))
    if args.dry_run:
        print("\n".join(" ".join(command) for command in commands.values()))
        return
    statuses = run_side_by_side(commands, None if args.minutes is None else args.minutes * 60)
    report = args.output / "report"
    try:  # here, not in a process of its own (whose imports took 9 s on the AVX-512 EPYC); the baselines from either
        # start apart
        report_command([args.output], "method,theseus.init", report, False, _no_report)
    except NoReport as problem:
        print(f"No report was written: {problem}", file=sys.stderr)
    failed = {folder: status for folder, status in statuses.items() if status}
    print(f"Report in {report}." + (f" Multiruns that failed: {failed} (their logs: <folder>.log)." if failed else ""))


class NoReport(Exception):
    """Why the report of a finished grid was not written (no run finished): said, the command goes on."""


def _no_report(problem: str) -> NoReturn:
    raise NoReport(problem)


def _job_refusals(command: list[str]) -> list[str]:
    """What would refuse the jobs of one multirun (``python -m theseus_pl -m OVERRIDES``), found here before any
    starts: on a leased GPU node a bad seed or override would otherwise fail every job in turn, on the lease's
    clock. Each job's settings are checked as the run checks them; its model and data, by each job as it starts."""
    from theseus_pl.app.checks.multirun import multirun_jobs, multirun_refusals  # the settings' checks: torch

    overrides = command[command.index("theseus_pl") + 2 :]
    folder = command[-1].removeprefix("hydra.sweep.dir=")
    try:
        multirun_jobs(overrides)  # composes the settings every job shares: Hydra's own refusals, once
    except (HydraException, ValueError) as error:
        return [f"{folder}: {error}"]
    return [f"{folder}: {problem}" for problem in multirun_refusals(overrides, each_value_once=True)]


def cli() -> None:
    """The ``theseus-pl-offline`` command."""
    main()


if __name__ == "__main__":
    cli()
