"""The report's files, byte for byte, over a planted sweep: every table it writes and what it prints.

The expected files in ``fixtures/report/`` were written by ``python -m theseus_pl.report`` over
:func:`plant_sweep`'s folder (its path written as ``RUNS``). They pin the report's output while its computation
changes; when a change to the output is meant, rewrite them from that command and read the diff.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from results_records import a_run, an_embedding_run, plant

from theseus_pl.app.kinds.task_model.record import ModelShape
from theseus_pl.app.kinds.task_model.report import score_by_rate
from theseus_pl.app.report.files import markdown_table
from theseus_pl.app.results.envelope import WandbLink
from theseus_pl.report import main

pytestmark = pytest.mark.quick

EXPECTED = Path(__file__).parent / "fixtures" / "report"

NARROWED = {"replacement.p": 0.5, "theseus.successor.importance": "magnitude"}  # a narrower feed-forward network
# folder, task, method, seed, grid point, successor score, successor layers and FFN width, speed-up
SWEEP = [
    *[(f"rte/curriculum_b01_s{seed}", "RTE", "theseus_curriculum", seed, {"replacement.b": 0.1}, score, 3, 1536, 1.9)
      for seed, score in ((1, 70.0), (2, 71.25), (3, 90.0))],
    *[(f"rte/curriculum_b03_s{seed}", "RTE", "theseus_curriculum", seed, {"replacement.b": 0.3}, score, 3, 1536, 1.95)
      for seed, score in ((1, 72.0), (2, 73.125), (3, 66.666666))],
    *[(f"rte/constant_p05_s{seed}", "RTE", "theseus_constant", seed, NARROWED, score, 3, 768, None)
      for seed, score in ((1, 68.0), (2, 69.005), (3, 70.0))],
    *[(f"rte/kd_s{seed}", "RTE", "kd", seed, {"optimizer.lr": 5e-5}, score, 4, 1536, 1.5)
      for seed, score in ((1, 65.0), (2, 66.0))],  # seed 3 missing, and a longer step budget (below)
    *[(f"mnli/curriculum_s{seed}", "MNLI", "theseus_curriculum", seed, {"replacement.b": 0.3}, score, 3, 1536, 2.0)
      for seed, score in ((1, 80.1), (2, 80.2))],  # two seeds: the median is their mean
    *[(f"mnli/kd_{name}_s{seed}", "MNLI", "kd", seed, {"optimizer.lr": lr}, score, 3, 1536, 2.0)
      for name, lr in (("a", 2e-4), ("b", 5e-5)) for seed, score in ((1, 78.0), (2, 79.0))],  # a tie: a comes first
    ("stsb/curriculum", "STS-B", "theseus_curriculum", 1, {"replacement.b": 0.3}, 86.0, 3, 1536, 1.9),
    ("stsb/anti", "STS-B", "theseus_anti_curriculum", 1, {"replacement.b": 0.3}, None, 3, 1536, 1.8),  # no score
    ("stsb/fine_tuning", "STS-B", "fine_tuning", 1, {"optimizer.lr": 5e-5}, 85.5, 3, None, 1.7),  # no FFN width
]  # fmt: skip


def plant_sweep(root: Path) -> None:
    """Finished runs of three tasks (MNLI scored on two splits), five methods, grid points and seeds, three shapes,
    a run without a score, one linked to W&B (with the copy W&B keeps), a p curve and a job without results."""
    linked = root / "rte" / "curriculum_b01_s1"
    wandb_dir = linked / "wandb" / "offline-run-20261122_100000-x1"
    for folder, task, method, seed, point, score, layers, width, speedup in SWEEP:
        steps = 750 if method == "kd" and task == "RTE" else 600
        settings = {"optimizer.lr": 1e-4, **point, "seed": seed, "trainer.max_steps": steps}
        record = a_run(task, method, 80.0 if task != "STS-B" else 88.0, score, settings=settings, seed=seed,
                       speedup=speedup, schedule=f"{method} schedule")  # fmt: skip
        successor = replace(record.successor, shape=ModelShape(layers=layers, hidden_size=384, intermediate_size=width))
        if task == "MNLI":
            successor = replace(successor, metrics={"accuracy_m": score / 100, "accuracy_mm": score / 100 + 0.01})
            splits = ["validation_matched", "validation_mismatched"]
            record = replace(record, data=replace(record.data, eval_splits=splits))
        if root / folder == linked:
            link = WandbLink(id="x1", name="RTE b=0.1", group="g", url="https://w/x1", dir=str(wandb_dir))
            record = replace(record, wandb=link)
            plant(wandb_dir / "files", replace(record, successor=successor))
        plant(root / folder, replace(record, successor=successor))
    (linked / "csv").mkdir()
    (linked / "csv" / "metrics.csv").write_text("step,train/p,val/score\n0,0.1,\n1,,0.6\n2,0.55,\n3,1.0,0.7\n")
    (root / "rte" / "unfinished" / ".hydra").mkdir(parents=True)
    (root / "rte" / "unfinished" / ".hydra" / "overrides.yaml").write_text("- seed=3\n- optimizer.lr=5e-5\n")


def test_the_reports_files_over_a_planted_sweep_stay_as_they_were(tmp_path, capsys):
    plant_sweep(tmp_path / "runs")
    main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    printed = capsys.readouterr().out.replace(str(tmp_path / "out"), "OUT")
    written = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir() if path.suffix != ".png"}
    written["stdout.txt"] = printed.encode()
    written = {name: text.replace(str(tmp_path / "runs").encode(), b"RUNS") for name, text in written.items()}
    assert sorted(written) == sorted(path.name for path in EXPECTED.iterdir())
    for name, text in written.items():
        assert text.decode() == (EXPECTED / name).read_bytes().decode(), name
    pictures = {"p_over_steps.png", "score_vs_rate.png", "budget_RTE.png"}  # RTE's KD ran a longer budget
    assert {path.name for path in (tmp_path / "out").glob("*.png")} == pictures


def test_a_dry_run_lists_the_runs_and_the_files_the_report_would_write_and_writes_none(tmp_path, capsys):
    plant_sweep(tmp_path / "runs")
    planned = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out"), "--dry-run"])
    printed = capsys.readouterr().out
    assert not (tmp_path / "out").exists()
    assert f"{len(SWEEP)} finished runs:" in printed and str(tmp_path / "runs" / "stsb" / "anti") in printed
    assert "1 jobs have no results yet" in printed  # the same findings as the real report
    written = main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert planned["written"] == written["written"]
    assert all(str(path) in printed for path in written["written"])
    assert planned["warnings"] == written["warnings"]


def test_sentence_embedding_runs_get_a_table_of_their_own_a_line_per_run_without_a_busy_speed(tmp_path, capsys):
    runs = tmp_path / "runs"
    plant(runs / "theseus_s1", an_embedding_run())
    plant(runs / "theseus_s2", an_embedding_run(seed=2, successor_sts=79.0))
    busy = {**an_embedding_run().speed, "other_cores": 1.3}
    untrained = an_embedding_run("embedding_truncation", 70.0, steps=0, best_step=None, schedule=None, speed=busy)
    plant(runs / "truncation", untrained)
    pairs = replace(an_embedding_run(successor_sts=80.0).data, train_pairs=4841)  # trained on STS-B's labelled pairs
    plant(runs / "pairs", an_embedding_run(successor_sts=80.0, data=pairs))
    plant(runs / "rte", a_run())  # a task-model run beside them: its tables as well
    report = main([str(runs), "--output", str(tmp_path / "out")])
    table = (tmp_path / "out" / "embedding_table.md").read_text().splitlines()
    assert table[0] == (
        "| method | seed | steps | layers | kept | STS-B predecessor | STS-B successor | retained % | cosine | MSE "
        "| batch-1 speed-up | batch-32 speed-up | trained on | folder |"
    )
    fidelity, top = "0.9712 | 1.23e-04", "3 | 3 4 5 | 82.00"  # 3 layers, the top ones
    theseus, vectors, pairs, fast = "embedding_theseus", "teacher's vectors", "labelled pairs", "1.90 | 1.94"
    assert table[2:] == [
        f"| {theseus} | 1 | 500 | {top} | 78.50 | 95.73 | {fidelity} | {fast} | {vectors} | {runs}/theseus_s1 |",
        f"| {theseus} | 2 | 500 | {top} | 79.00 | 96.34 | {fidelity} | {fast} | {vectors} | {runs}/theseus_s2 |",
        f"| embedding_truncation | 1 | 0 | {top} | 70.00 | 85.37 | {fidelity} |  |  | {vectors} | {runs}/truncation |",
        f"| {theseus} | 1 | 500 | {top} | 80.00 | 97.56 | {fidelity} | {fast} | {pairs} | {runs}/pairs |",
    ]  # the busy machine's speed-ups left out; the same method on pairs a line of its own
    assert (tmp_path / "out" / "embedding_table.csv").is_file() and (tmp_path / "out" / "table.md").is_file()
    assert report["warnings"] == [
        "1 sentence-embedding run(s) timed their speed while other processes kept the machine busy: their speed-ups "
        f"are left out of the table ({runs}/truncation)."
    ]
    printed = capsys.readouterr().out
    assert "| embedding_truncation |" in printed and "5 finished runs;" in printed


def test_a_dry_run_lists_a_sentence_embedding_run_whose_sts_score_was_written_as_null(tmp_path, capsys):
    """A constant model's NaN Spearman is written as null: its headline, by which the dry run lists each run, raised
    TypeError formatting the None."""
    plant(tmp_path / "runs" / "constant", an_embedding_run(successor_sts=float("nan")))
    main([str(tmp_path / "runs"), "--output", str(tmp_path / "out"), "--dry-run"])
    assert f"{tmp_path / 'runs' / 'constant'}: embedding_theseus: STS-B dev 82.00 (predecessor) -> n/a (successor)" in (
        capsys.readouterr().out
    )


def test_a_run_named_with_its_parent_folder_is_reported_once(tmp_path, capsys):
    """It was two rows of runs.md and two seeds of a median."""
    plant(tmp_path / "sweep" / "s1", a_run("RTE", "kd", 80.0, 70.0, seed=1))
    main([str(tmp_path / "sweep" / "s1"), str(tmp_path / "sweep"), "--output", str(tmp_path / "report")])
    assert "1 finished run" in capsys.readouterr().out
    runs = (tmp_path / "report" / "runs.md").read_text().splitlines()
    assert len([line for line in runs if "kd" in line]) == 1


def test_score_against_rate_is_the_median_of_each_rates_runs_and_leaves_out_a_run_without_a_score(tmp_path):
    """A null score (a NaN Spearman) crashed the plot with a TypeError; and one line through every run, sorted by
    (p, score), zigzagged between the seeds at each p."""
    at = {"replacement.p": 0.7, "seed": 1}
    runs = [*(a_run("RTE", "theseus_constant", 80.0, score, settings={"replacement.p": 0.5, "seed": seed})
              for seed, score in ((1, 68.0), (2, 71.0), (3, 70.0))),
            a_run("RTE", "theseus_constant", 80.0, None, settings=at), a_run("RTE", "theseus_constant", 80.0, 60.0,
            settings=at), a_run("CoLA", "theseus_constant", 40.0, None, settings=at),
            a_run("RTE", "theseus_curriculum", 80.0, 90.0, settings=at)]  # fmt: skip
    assert score_by_rate(runs) == {"RTE": [(0.5, 70.0, 68.0, 71.0), (0.7, 60.0, 60.0, 60.0)]}
    plant_sweep(tmp_path / "runs")
    plant(tmp_path / "runs" / "rte" / "constant_unscored", runs[3])
    main([str(tmp_path / "runs"), "--output", str(tmp_path / "out")])
    assert (tmp_path / "out" / "score_vs_rate.png").stat().st_size > 0


def test_a_number_under_a_hundredth_keeps_two_significant_digits_where_two_decimals_would_write_zero():
    """A static embedding model's 0.004 ms a call, beside the trials' on a search's front, was written as 0.00."""
    table = pd.DataFrame({"model": ["model2vec", "trial 3", "none", "exact"],
                          "ms a call": [0.0042, 12.345, float("nan"), 0.0]})  # fmt: skip
    assert markdown_table(table).splitlines()[2:] == [
        "| model2vec | 0.0042 |", "| trial 3 | 12.35 |", "| none |  |", "| exact | 0.00 |"
    ]  # fmt: skip
