"""A run killed at a random step resumes exactly: on real RTE rows, with a tiny model (the model is not the point)."""

import os
import random
import signal
import sys
from pathlib import Path

import pytest
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command
from test_app import logged

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import run

pytestmark = pytest.mark.slow


def per_step(folder: Path, metric: str) -> dict[int, str]:
    """``metric`` at each step of a run's CSV log, as written (compared as text: equal means bit-identical)."""
    import csv

    with (folder / "csv" / "metrics.csv").open(newline="") as handle:
        return {int(row["step"]): row[metric] for row in csv.DictReader(handle) if row.get(metric)}


def test_a_run_killed_at_a_random_step_resumes_exactly(tiny_base, real_glue_dir, tmp_path):
    overrides = [
        *tiny_run_overrides(tiny_base, real_glue_dir, tmp_path), "data.max_train_samples=100",
        "data.max_eval_samples=48", "data.batch_size=8", "trainer.max_steps=40", "trainer.val_check_interval=10",
        "checkpoint.every_n_steps=4", "schedule_steps=20",
    ]  # 13 batches an epoch: the run crosses three epoch ends, and most checkpoints fall mid-epoch  # fmt: skip
    kill_step = random.randint(21, 39)  # after the schedule's switch at 20 or before it, between validations
    folder = tmp_path / "run"
    killed = run_command(
        [sys.executable, "-m", "theseus_pl", *overrides, f"hydra.run.dir={folder}",
         "+callbacks.kill._target_=raise_at_step.KillAtStep", f"+callbacks.kill.step={kill_step}"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not (folder / "results.json").exists()

    resumed = run(compose_config(*overrides))
    whole = run(compose_config(*tiny_run_overrides(tiny_base, real_glue_dir, tmp_path, output="whole")[:-1],
                               *overrides[len(tiny_run_overrides(tiny_base, real_glue_dir, tmp_path)):],
                               f"paths.output_dir={tmp_path / 'whole'}"))  # fmt: skip

    assert resumed.resumed_from == str(folder / "checkpoints" / "last.ckpt")
    context = f"killed before step {kill_step}"
    assert sorted(per_step(folder, "train/p")) == list(range(40)), context
    assert per_step(folder, "train/loss") == per_step(tmp_path / "whole", "train/loss"), context
    assert logged(folder) == logged(tmp_path / "whole"), context  # every row once: none lost, none twice
    for part in ("predecessor", "successor"):
        assert getattr(resumed, part).score == getattr(whole, part).score, context
    assert read_run(folder / "results.json", TaskModelResults).steps == 40
