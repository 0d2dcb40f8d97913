"""Hydra launchers: the SLURM launcher's local try runs a sweep's jobs as submitit would on the cluster; a launcher
whose plugin is missing is named with the extra that brings it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from command_runs import run_command, seed_machine_bf16
from omegaconf import OmegaConf
from test_ablations import sweep_config
from test_wandb_runs import multirun_overrides
from wandb_records import read_offline_run

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run


@pytest.mark.parametrize(
    ("launcher", "target"),
    [("local_parallel", "JoblibLauncher"), ("slurm", "SlurmLauncher"), ("slurm_local", "LocalLauncher")],
)
def test_launcher_configs_compose(launcher, target):
    assert sweep_config(f"hydra/launcher={launcher}").hydra.launcher._target_.endswith(target)


def test_the_local_try_asks_for_what_a_slurm_job_asks_for():
    slurm = sweep_config("hydra/launcher=slurm").hydra.launcher
    local = sweep_config("hydra/launcher=slurm_local").hydra.launcher
    for resource in ("nodes", "tasks_per_node", "gpus_per_node", "cpus_per_task", "mem_gb", "timeout_min"):
        assert local[resource] == slurm[resource], resource
    assert "partition" not in local  # SLURM's own options stay SLURM's


def app(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m theseus_pl <arguments>`` with W&B offline."""
    return run_python(["-m", "theseus_pl", *arguments], cwd)


def app_without(hidden: str, *arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    """The same where the module ``hidden`` (and those under it) cannot be imported, as where it is not installed."""
    hider = (
        "import runpy, sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {hidden!r} or name.startswith({hidden + '.'!r}):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "runpy.run_module('theseus_pl', run_name='__main__', alter_sys=True)\n"
    )
    return run_python(["-c", hider, *arguments], cwd)


def run_python(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline"}
    return run_command([sys.executable, *arguments], cwd=cwd, env=env, timeout=600)


@pytest.mark.parametrize(
    ("arguments", "hidden", "plugin"),
    [
        (["hydra/launcher=slurm_local"], "submitit", "hydra-submitit-launcher"),
        (["hydra/launcher=slurm"], "hydra_plugins.hydra_submitit_launcher", "hydra-submitit-launcher"),
        (["hydra/launcher=submitit_local"], "submitit", "hydra-submitit-launcher"),
        (["+experiment=sst2_quick", "+sweep=protocol"], "hydra_plugins.hydra_joblib_launcher", "hydra-joblib-launcher"),
    ],
)
def test_a_launcher_whose_plugin_is_missing_names_the_extra_to_install(tmp_path, arguments, hidden, plugin):
    completed = app_without(hidden, "-m", *arguments, cwd=tmp_path)
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert plugin in completed.stderr and 'pip install "theseus_pl[cluster]"' in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not (tmp_path / "multirun").exists()


@pytest.mark.slow
def test_the_local_try_of_a_slurm_sweep_runs_each_job_in_its_own_process(tiny_base, glue_dir, tmp_path):
    sweep = tmp_path / "sweep_2026"
    seed_machine_bf16(tmp_path / "cache")  # each job's process starts knowing it
    # The learning rate swept, not the seed (part of the predecessor's cache key): both jobs need one predecessor.
    completed = app(
        "-m", "hydra/launcher=slurm_local", *multirun_overrides(tiny_base, glue_dir, tmp_path),
        "optimizer.lr=1e-3,2e-3", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]

    # submitit's local job id is the process id of the job's controller; Hydra records it as the job's id
    submitted = {
        folder.name for folder in (sweep / ".submitit").iterdir() if (folder / f"{folder.name}_0_result.pkl").is_file()
    }
    job_ids = {str(OmegaConf.load(sweep / str(job) / ".hydra" / "hydra.yaml").hydra.job.id) for job in (0, 1)}
    assert len(submitted) == 2 and job_ids == submitted and all(i.isdigit() for i in job_ids)

    results = [read_run(sweep / str(job) / "results.json", TaskModelResults) for job in (0, 1)]
    assert results[0].hardware == results[1].hardware  # one precision for the sweep
    assert sorted(r.predecessor.origin for r in results) == ["cache", "fine-tuned"]  # built once, by one job
    assert len([p for p in (tmp_path / "cache" / "predecessors").iterdir() if not p.name.startswith(".")]) == 1

    runs = [read_offline_run(folder) for job in (0, 1) for folder in (sweep / str(job) / "wandb").glob("offline-run-*")]
    assert [run.id for run in runs] == [r.wandb.id for r in results] and runs[0].id != runs[1].id
    assert {run.group for run in runs} == {"sweep_2026"} and all(run.exit_code == 0 for run in runs)
