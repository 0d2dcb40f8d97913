"""``python -m theseus_pl ... --check``: every check a run makes before compute, and its plan, without running it."""

import os
import subprocess
import sys

import pytest
from app_runs import tiny_run_overrides
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from test_app import EXPERIMENTS


def app(cwd, *arguments: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "WANDB_MODE": "offline", "THESEUS_PL_CACHE": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "theseus_pl", *arguments], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


@pytest.mark.slow
def test_check_prints_the_plan_and_writes_no_run_folder(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    completed = app(tmp_path, *overrides, "--check")
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    assert lines[0] == "The run passes every check before compute (nothing was trained or written). It would run:"
    plan = dict(line.strip().split(": ", 1) for line in lines[1:])
    assert plan["kind"] == "task model (an encoder compressed on a task)"
    assert plan["data"].startswith("RTE, GLUE RTE, from the classic GLUE files: ")
    assert plan["predecessor"].endswith("(fine-tuned on the task first, or from the cache), 4 layers")
    assert plan["training"].startswith("6 optimizer steps of 4 rows (24 rows")
    assert plan["method"] == "theseus, 2 layers kept"
    assert plan["schedule"].startswith("curriculum: p = ") and plan["precision"]
    assert plan["outputs"].startswith(f"would be written to {tmp_path / 'outputs' / 'RTE'}")
    assert not (tmp_path / "outputs").exists()  # nothing of the run is left: no folder, no log
    assert not (tmp_path / "cache" / "predecessors").exists()  # the predecessor was not fine-tuned


@pytest.mark.slow
def test_check_refuses_a_bad_run_and_a_sweeps_bad_job_as_the_run_would(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    refused = app(tmp_path, *overrides, "optimizer.lr=0", "--check")
    assert refused.returncode == 2 and "- optimizer.lr=0 must be a number above 0" in refused.stderr
    sweep = app(tmp_path, "-m", *overrides, "seed=1,2", "optimizer.lr=1e-3,0", "--check")
    assert sweep.returncode == 2
    refusals = [line for line in sweep.stderr.splitlines() if line.startswith("- ")]  # after the tokenising bars
    assert refusals == [  # numbered as Hydra's sweeper numbers them: a key where it first stood
        "- job 2 (optimizer.lr=0 seed=1): optimizer.lr=0 must be a number above 0, e.g. 2e-5.",
        "- job 3 (optimizer.lr=0 seed=2): optimizer.lr=0 must be a number above 0, e.g. 2e-5.",
    ]
    passing = app(tmp_path, "-m", *overrides, "seed=1,2", "--check")
    assert (
        passing.returncode == 0
        and "passes every job's checks of its settings, models and data (2 jobs;" in passing.stdout
    )
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_names_its_run_folder(experiment):
    """The run folder's name resolves for both kinds (a decoder-LM run has no data.task)."""
    with initialize_config_module("theseus_pl.conf", version_base="1.3"):
        cfg = compose("train", overrides=[f"+experiment={experiment}"], return_hydra_config=True)
    folder = OmegaConf.select(cfg, "hydra.run.dir").split("/")
    assert folder[0] == "outputs" and folder[1] == ("language_model" if experiment.startswith("smollm2") else
                                                    cfg.data.get("task") or "rotten_tomatoes")  # fmt: skip
