"""A multirun checks every job (its settings, models and data) before its first job starts, and names each job that
would be refused."""

import os
import sys

import pytest
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command
from omegaconf import OmegaConf

from theseus_pl.__main__ import cli
from theseus_pl.app.checks import multirun
from theseus_pl.app.checks.multirun import multirun_jobs, multirun_refusals
from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.run.pipeline import refusal_problems


def test_a_sweep_with_one_bad_job_is_refused_before_any_job_runs_naming_that_job(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"  # an empty cache: the check tokenises the data, as in CI
    work.mkdir()
    command = [sys.executable, "-m", "theseus_pl", "-m", "+experiment=demo", "optimizer.lr=1e-4,0", "seed=1"]
    environment = {**os.environ, "WANDB_MODE": "offline", "THESEUS_PL_CACHE": str(cache)}
    completed = run_command(command, cwd=work, env=environment, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    lines = completed.stderr.strip().splitlines()  # the data's progress bars come first where it is tokenised
    refusal = lines.index("The sweep cannot start (no job was run); these jobs would be refused:")
    assert lines[refusal + 1 :] == ["- job 1 (optimizer.lr=0): optimizer.lr=0 must be a number above 0, e.g. 2e-5."]
    assert list(work.iterdir()) == []  # no multirun folder, no job started


def test_hydra_mode_multirun_without_m_is_checked_as_the_multirun_hydra_runs(tmp_path, monkeypatch, capsys):
    """Hydra runs a multirun for ``hydra.mode=MULTIRUN`` as for ``-m``; only the flag was looked for, so its jobs
    started unchecked, each refused in its turn."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["theseus_pl", "hydra.mode=MULTIRUN", "+experiment=demo", "seed=1,2",
                                      "optimizer.lr=0"])  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        cli()
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "The sweep cannot start (no job was run); these jobs would be refused:",
        "- every job: optimizer.lr=0 must be a number above 0, e.g. 2e-5.",
    ]
    assert not list(tmp_path.iterdir())  # no multirun folder, no job started


def test_a_job_folder_holding_a_finished_run_of_other_settings_is_named_before_any_job_runs(tmp_path):
    """``--check`` passed such a sweep, and the sweep ran until that job, which refused itself in a traceback."""
    sweep = tmp_path / "sweep"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    OmegaConf.save(
        compose_config("+experiment=demo", "seed=1", "optimizer.lr=5e-4"), sweep / "0" / ".hydra" / "config.yaml"
    )
    (sweep / "0" / "results.json").write_text("{}")
    (sweep / "1").mkdir()  # a job folder holding nothing: a job that had not started
    (refusal,) = multirun_refusals(["+experiment=demo", "seed=1,2", f"hydra.sweep.dir={sweep}"])
    assert refusal.startswith(
        f"job 0 (seed=1): {sweep / '0'} holds a finished run of other settings than this command's: "
        "optimizer.lr=0.0005 there, "
    )
    assert refusal.endswith("Fix: resume=force to redo it here with this command's settings, or "
                            "hydra.sweep.dir=ANOTHER_FOLDER for a new run.")  # fmt: skip
    assert multirun_refusals(["+experiment=demo", "seed=1,2", f"hydra.sweep.dir={sweep}", "resume=force"]) == []
    # a folder named by what only the job knows (its name, Hydra's runtime): not read, and no traceback
    assert multirun_refusals(["+experiment=demo", "seed=1,2", "hydra.sweep.dir=out/${hydra:job.name}"]) == []


def test_the_jobs_are_the_sweeps_combinations_from_the_command_line_and_the_sweep_config():
    jobs = multirun_jobs(["+experiment=smollm2_quick", "+sweep=lm_protocol", "seed=3"])
    assert len(jobs) == 6  # the command line's seed replaces the sweep config's seeds 1,2
    points = ("theseus_curriculum", "theseus_constant", "shortgpt", "shortgpt_healed", "truncation", "streamline")
    assert {job[0] for job in jobs} == {f"lm_protocol={point}" for point in points}
    assert all("seed=3" in job and "+experiment=smollm2_quick" in job for job in jobs)
    assert multirun_refusals(["+experiment=smollm2_quick", "+sweep=lm_protocol"]) == []  # the protocol as shipped


def test_every_job_of_a_mixed_sweep_is_checked_by_its_own_kind():
    refusals = multirun_refusals(["+experiment=smollm2_quick", "method=lm_theseus,pkd", "deploy.quantize=null,int8"])
    assert [refusal.split(":", 1)[0] for refusal in refusals] == [
        "job 1 (method=lm_theseus deploy.quantize=int8)", "job 2 (method=pkd deploy.quantize=null)",
        "job 3 (method=pkd deploy.quantize=int8)",
    ]  # fmt: skip
    assert "method=pkd compresses encoder task models" in refusals[1]


def test_a_job_refused_by_what_its_predecessor_says_is_named_before_any_job_runs(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    sweep = [*(o for o in overrides if not o.startswith("theseus.successor_layers")), "theseus.successor_layers=99,2"]
    assert multirun_refusals(sweep) == []  # the settings alone are fine: 99 layers is a number of layers
    assert multirun_refusals(sweep, refusal_problems) == [  # the tiny predecessor has 4
        "job 0 (theseus.successor_layers=99): theseus.successor_layers=99 must be between 1 and the predecessor's 4 "
        "layers."
    ]


def test_a_problem_every_job_shares_is_said_once():
    assert multirun_refusals(["+experiment=demo", "seed=1,2,3", "optimizer.lr=0"]) == [
        "every job: optimizer.lr=0 must be a number above 0, e.g. 2e-5."
    ]


def test_each_value_once_checks_a_job_for_each_swept_value_not_every_combination(monkeypatch):
    """What a grid of hundreds of jobs (``python -m theseus_pl.offline run``) checks in seconds."""
    checked = []
    monkeypatch.setattr(multirun, "checked_settings", lambda cfg: checked.append(cfg) or checked_settings(cfg))
    sweep = ["+experiment=demo", "seed=1,2,3", "optimizer.lr=1e-5,0,2e-5"]  # 9 jobs
    refusals = multirun_refusals(sweep, each_value_once=True)
    assert [(cfg.seed, cfg.optimizer.lr) for cfg in checked] == [(1, 1e-5), (1, 0), (1, 2e-5), (2, 1e-5), (3, 1e-5)]
    assert refusals == ["job 1 (seed=1 optimizer.lr=0): optimizer.lr=0 must be a number above 0, e.g. 2e-5."]
    shared = ["+experiment=demo", "seed=1,2", "optimizer.weight_decay=0.01,0.02", "optimizer.lr=0"]  # 4 jobs
    assert multirun_refusals(shared, each_value_once=True) == [
        "all 3 jobs checked (one for each swept value): optimizer.lr=0 must be a number above 0, e.g. 2e-5."
    ]
