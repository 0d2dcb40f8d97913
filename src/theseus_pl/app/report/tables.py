"""``python -m theseus_pl.report`` (:mod:`theseus_pl.report` lists what it writes): the runs of every kind found below
the folders given, and each kind's tables and plots written by the part its kind registered (a task model's in
:mod:`~theseus_pl.app.kinds.task_model.report`)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd

from theseus_pl.app.config.run_folder import RECORD_SUBDIR, SEARCH_ANSWER, SEARCH_FOLDER
from theseus_pl.app.report.files import remove_stale_files, write_markdown_and_csv
from theseus_pl.app.report.search_front import SEARCH_FRONT, search_front_table
from theseus_pl.app.results.envelope import ResultsError, RunRecord, UnknownKind, by_kind
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.results.registry import parts

log = logging.getLogger(__name__)
REPORT = "python -m theseus_pl.report"
DEFAULT_ROWS = "method"  # --rows' default (theseus_pl.report), accepted whatever kinds the runs are of


def find_records(folders: Sequence[Path]) -> tuple[list[RunRecord], list[str]]:
    """Every run's record, of any kind (each with its ``folder``), and the Hydra jobs that have none yet. A record
    that cannot be read (cut short, a newer schema) is skipped with a warning naming it: the other runs are reported."""
    records = []
    for path in results_files(folders):
        try:
            records.append(read_run(path))
        except ResultsError as error:
            log.warning("Skipped %s: %s", path.parent, error)
    missing = []
    for job in _jobs_without_results(folders):
        if ended_by_search(job) is None:
            overrides = job / RECORD_SUBDIR / "overrides.yaml"
            what = " ".join(line.removeprefix("- ").strip() for line in overrides.read_text().splitlines()) \
                if overrides.is_file() else ""  # fmt: skip
            missing.append(f"{job} ({what})" if what else str(job))
    return records, missing


def ended_trials(folders: Sequence[Path]) -> list[str]:
    """The trials a search below the folders ended without a record, each with why: pruned half-way or failed as a
    run (a job folder without results), and pruned before training (no folder at all, as its search's answer lists
    them). None will have results, and none is among :func:`find_records`' jobs that have none yet."""
    ended = [f"{job}: {why}" for job in _jobs_without_results(folders) if (why := ended_by_search(job)) is not None]
    for answer in found_below(folders, Path(SEARCH_FOLDER) / SEARCH_ANSWER):
        sweep = answer.parent.parent
        ended += [f"{sweep / trial} (never trained): {why}" for trial, why in _ended_in(answer).items()
                  if not (sweep / trial).exists()]  # fmt: skip
    return ended


def ended_by_search(job: Path) -> str | None:
    """Why the search of the sweep that holds ``job`` ended it without a record, as the search's answer
    (``<sweep>/search/search.json``) says of its trial (a trial's folder is its number); None for a job of any other
    sweep, or one that search did not end."""
    return _ended_in(job.parent / SEARCH_FOLDER / SEARCH_ANSWER).get(job.name)


def _ended_in(answer: Path) -> dict[str, str]:
    """The trials a search's answer says it ended without a point (failed, pruned, cut short and run again), by
    number, each with why."""
    try:
        written = json.loads(answer.read_text())
    except (OSError, ValueError):  # no search here, or its answer is being written
        return {}
    return {**written.get("failed", {}), **written.get("pruned", {}), **written.get("cut_short", {})}


def _jobs_without_results(folders: Sequence[Path]) -> list[Path]:
    """The Hydra jobs below the folders (a folder with ``.hydra/``) that have no ``results.json``."""
    jobs = (record.parent for record in found_below(folders, Path(RECORD_SUBDIR)))
    return [job for job in jobs if not (job / "results.json").is_file()]


def results_files(folders: Sequence[Path]) -> list[Path]:
    """Every ``results.json`` below the folders, of any kind of run, but the copies in W&B run folders."""
    for folder in folders:
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder.")
    found = [path for path in found_below(folders, Path("results.json")) if not _is_wandb_copy(path)]
    return list({path.resolve(): path for path in found}.values())  # one file that two links reach: once


def found_below(folders: Sequence[Path], relative: Path) -> list[Path]:
    """``relative`` in each folder below the folders (themselves included) that holds it, the folders' in their order,
    each's sorted: linked folders followed (runs gathered into one folder by ``ln -s``, which ``Path.rglob`` passed
    over without a word), each folder once, however many of the folders given or links reach it (a sweep given beside
    one of its jobs)."""
    seen: set[str] = set()
    found = []
    for folder in folders:
        below = []
        for root, subfolders, _ in os.walk(folder, followlinks=True):
            if (real := os.path.realpath(root)) in seen:  # reached before, or a link back up: not walked again
                subfolders.clear()
                continue
            seen.add(real)
            if (candidate := Path(root) / relative).exists():
                below.append(candidate)
        found += sorted(below)
    return found


FINISHED_RUNS = "the folders of finished runs (a run folder or a multirun folder such as multirun/2026-01-01_12-00-00)"


def no_results(folders: Sequence[Path], give: str = FINISHED_RUNS) -> FileNotFoundError:
    """The error for folders that yielded no run to report: "no results.json" is untrue where some were found and
    skipped as unreadable, so that case names their count and points at the warnings; and a sweep whose jobs are all
    still running is the right folder, asked too soon, so that case names them."""
    where = ", ".join(map(str, folders))
    unreadable = sum(not _readable(path) for path in results_files(folders))
    if unreadable:
        return FileNotFoundError(
            f"No readable results.json under {where}: {unreadable} found could not be read (the warnings above say "
            f"why); give {give}."
        )
    if running := [job for job in _jobs_without_results(folders) if ended_by_search(job) is None]:
        return FileNotFoundError(
            f"No run under {where} has finished yet: {len(running)} jobs have no results.json, still running or "
            f"stopped before their end ({', '.join(map(str, running))}); report them once one has finished."
        )
    return FileNotFoundError(f"No results.json under {where}: give {give}.")


def _readable(results: Path) -> bool:
    try:
        read_run(results)
    except ResultsError:
        return False
    return True


def _is_wandb_copy(results: Path) -> bool:
    """The copy each run saves into its W&B run's files (``wandb/offline-run-*/files/``): the same run again, also
    where it is reached by W&B's link ``wandb/latest-run``."""
    run_folder = results.resolve().parent.parent.name
    return results.parent.name == "files" and run_folder.startswith(("run-", "offline-run-"))


def unknown_rows(records: Sequence[RunRecord], rows: str) -> str | None:
    """Why ``--rows`` names something the runs it groups lack, as the kind whose tables group them by it says (the
    first such kind's answer); None where each kind that checks finds every name in its runs. A kind's tables read
    ``--rows`` where it registers ``unknown_rows``: a ``--rows`` other than the default over runs of no such kind (a
    report of decoder LMs alone) is refused, as it would change nothing while the dry run promised a row for each."""
    checks = parts("unknown_rows")
    if rows != DEFAULT_ROWS and checks and not reads_rows(records):
        found = ", ".join(repr(kind) for kind in dict.fromkeys(record.kind for record in records))
        return (
            f"--rows: read only by the tables of runs of kind {', '.join(map(repr, checks))}; these runs are of kind "
            f"{found}, whose tables take no --rows: leave it out."
        )
    for kind, check in checks.items():
        runs = [record for record in records if record.kind == kind]
        if runs and (problem := check(runs, rows)):
            return problem
    return None


def reads_rows(records: Sequence[RunRecord]) -> bool:
    """Whether the tables of any of these runs read ``--rows``: those of a kind registering ``unknown_rows``."""
    readers = parts("unknown_rows")
    return any(record.kind in readers for record in records)


def varied_keys(settings: list[dict[str, Any]]) -> list[str]:
    """The keys whose values differ between the settings (a key some lack counts as differing)."""
    by_key = settings_by_key(settings)
    return list(by_key.columns[by_key.nunique() > 1])


def settings_by_key(settings: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One column per key, sorted, each value as JSON (so lists compare too); a key a setting lacks reads as null."""
    by_key = pd.DataFrame([{key: json.dumps(value) for key, value in setting.items()} for setting in settings])
    return by_key.sort_index(axis=1).fillna("null")


def report_command(folders: list[Path], rows: str, output: Path, dry_run: bool,
                   refuse: Callable[[str], NoReturn]) -> dict[str, Any]:  # fmt: skip
    """The command, its line read: the report of the runs below ``folders`` into ``output`` (or, ``dry_run``, its
    plan); ``refuse`` ends the command on a problem with the command line's own words."""
    logging.basicConfig(level=logging.WARNING, format="Warning: %(message)s")  # a run skipped, in one line
    try:
        records, missing = find_records(folders)  # one pass over the runs of every kind
        if not records:
            raise no_results(folders)
    except FileNotFoundError as error:
        refuse(str(error))
    if problem := unknown_rows(records, rows):
        refuse(problem)
    if output.exists() and not output.is_dir():
        refuse(f"--output {output} is a file: give the folder the tables and plots go into.")
    try:
        report = (planned_report if dry_run else write_report)(records, rows, output)
    except UnknownKind as error:  # a kind the report has no tables for: refused before anything is written
        refuse(str(error))
    except OSError as error:  # a folder it may not write into
        refuse(f"The report cannot be written into {output}: {error}")
    if missing:
        print(f"{len(missing)} jobs have no results yet:\n  " + "\n  ".join(missing))
    if ended := ended_trials(folders):
        print(f"{len(ended)} trials a search ended without results (no point on its front):\n  " + "\n  ".join(ended))
    for warning in report["warnings"]:
        print(f"Warning: {warning}")
    return report | {"missing": missing}


def write_report(records: list[RunRecord], rows: str, output: Path) -> dict[str, Any]:
    """Every table and plot of the runs of every kind into ``output``, each kind's by the tables it registered (in the
    registry's order); prints the tables and the files written."""
    parted = by_kind(records, reported := parts("report"), REPORT)
    output.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"tasks": [], "table": {}}  # the task models' table, where there are task models
    written, warnings = [], []
    for kind, runs in parted.items():
        if runs:
            part = reported[kind](runs, rows, output)
            written, warnings, report = written + part.written, warnings + part.warnings, report | part.values
            if part.shown is not None:
                print(part.shown.read_text())
    if not (fronts := search_front_table(records)).empty:  # a search's, of any kind it weighs, from its pick's record
        written += write_markdown_and_csv(fronts, output, SEARCH_FRONT)
    print(f"{len(records)} finished runs; wrote {', '.join(str(p) for p in written)}")
    if stale := remove_stale_files(output, written):
        print(f"Removed what an earlier report left there: {', '.join(path.name for path in stale)}")
    return report | {"warnings": warnings, "written": written}


def planned_report(records: list[RunRecord], rows: str, output: Path) -> dict[str, Any]:
    """The dry run: the runs found and the files :func:`write_report` would write into ``output``, written nowhere
    but a temporary folder (which files there are depends on the runs: shapes, budgets, curves), then dropped."""
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
        report = write_report(records, rows, Path(scratch))
        planned = [output / path.relative_to(scratch) for path in report["written"]]
    print(f"{len(records)} finished runs:")
    print("\n".join(f"  {record.folder}: {record.headline()}" for record in records))
    by_rows = f", a row for each {rows}" if reads_rows(records) else ""
    print(f"Dry run: nothing was written. The report would write {len(planned)} files into {output}{by_rows}:")
    print("\n".join(f"  {path}" for path in planned))
    return report | {"written": planned}
