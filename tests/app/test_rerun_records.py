"""A rerun into a run's folder keeps the record true: an interrupted run resumes only under the settings that trained
it, a checkpoint that cannot be read is named with how to start over, and a finished run's record is never
rewritten by a command that did not run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command
from omegaconf import OmegaConf

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resume import training_settings
from theseus_pl.app.config.run_folder import folder_problem, record_subdir
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, run
from theseus_pl.app.run.stages import run_hardware
from theseus_pl.deploy import main as deploy_main
from theseus_pl.lightning.callbacks import PRECISION_KEY, SETTINGS_KEY

KILLED_AT_5 = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]


@pytest.fixture
def interrupted(tiny_base, glue_dir, tmp_path):
    """The tiny run's overrides, and its folder holding ``checkpoints/last.ckpt`` of step 4 (it failed at step 5)."""
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *KILLED_AT_5))
    return overrides, tmp_path / "run"


def test_a_resume_under_other_settings_is_refused_with_both_values_and_the_way_to_start_over(interrupted):
    overrides, folder = interrupted
    last = folder / "checkpoints" / "last.ckpt"
    recorded = torch.load(last, map_location="cpu", weights_only=False)[SETTINGS_KEY]
    assert recorded == training_settings(compose_config(*overrides))
    changed = ["optimizer.lr=0.5", "seed=7", "theseus.successor_layers=1"]
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides, *changed))
    (problem,) = refused.value.problems
    assert problem == (
        f"{last} (step 4) was trained with other settings than this command's: optimizer.lr=0.001 there, 0.5 here; "
        "seed=42 there, 7 here; theseus.successor_layers=2 there, 1 here. Rerun with its settings to resume, "
        "resume=false to start over in this folder, or hydra.run.dir=ANOTHER_FOLDER for a new run."
    )  # data.seed and the other keys set from ${seed} are not named beside it
    with pytest.raises(RunRefused, match=r"\(step 4\) was trained with other settings"):
        plan(compose_config(*overrides, "seed=7"))  # --check says so too
    # what only watches or comes after training may change: the run resumes
    resumed = run(compose_config(*overrides, "benchmark.repeats=0", "logger=csv", "callbacks.progress_bar=null"))
    assert resumed.resumed_from == str(last) and resumed.steps == 6
    assert resumed.settings["optimizer.lr"] == 0.001 and resumed.settings["seed"] == 42
    # Finished, with no .hydra/config.yaml (made from Python, or the file deleted): the record's settings are compared
    # (the rerun exited 0 and printed the old run's numbers as this command's)
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides, "optimizer.lr=0.5"))
    assert refused.value.problems == [
        f"{folder} holds a finished run of other settings than this command's: optimizer.lr=0.001 there, 0.5 here "
        "(its results.json: it has no .hydra/config.yaml); it would be left as it is. Fix: resume=force to redo it "
        "here with this command's settings, or hydra.run.dir=ANOTHER_FOLDER for a new run."
    ]
    assert run(compose_config(*overrides, "benchmark.repeats=0")) == resumed  # nothing the record holds differs


def test_a_resumed_run_records_its_time_through_the_resume_not_since_it(interrupted):
    overrides, folder = interrupted
    last = folder / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    (clock,) = [key for key in checkpoint["callbacks"] if key.startswith("RunClock")]
    assert 0 < checkpoint["callbacks"][clock]["seconds"] < 600  # the killed process's seconds up to step 4
    checkpoint["callbacks"][clock]["seconds"] = 3600.0  # as if its first four steps had taken an hour
    torch.save(checkpoint, last)
    resumed = run(compose_config(*overrides))
    assert resumed.resumed_from == str(last) and 3600 < resumed.wall_seconds < 3600 + 600
    afresh = run(compose_config(*overrides, "resume=force"))
    assert afresh.resumed_from is None and afresh.wall_seconds < 600


def test_a_resume_in_another_precision_than_its_checkpoints_is_refused_until_asked_for_by_name(interrupted):
    overrides, folder = interrupted
    last = folder / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    here = checkpoint[PRECISION_KEY]
    assert here == run_hardware(compose_config(*overrides).trainer, folder.parent / "cache").precision
    elsewhere = "bf16-mixed" if here == "32-true" else "32-true"
    checkpoint[PRECISION_KEY] = elsewhere  # as if trained on a machine where auto chose the other one
    torch.save(checkpoint, last)
    for refused_by in (run, plan):  # the run, and --check
        with pytest.raises(RunRefused) as refused:
            refused_by(compose_config(*overrides))
        assert refused.value.problems == [
            f"{last} (step 4) was trained in {elsewhere}; this command would go on in {here} (trainer.precision=auto "
            f"chose it on this machine). Rerun with trainer.precision={elsewhere} to resume in it, resume=false to "
            "start over in this folder, or hydra.run.dir=ANOTHER_FOLDER for a new run."
        ]
    resumed = run(compose_config(*overrides, f"trainer.precision={elsewhere}"))  # the fix it names
    assert resumed.resumed_from == str(last) and resumed.hardware.precision == elsewhere and resumed.steps == 6


def test_a_checkpoint_cut_short_is_named_with_how_to_start_over(interrupted):
    overrides, folder = interrupted
    last = folder / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])  # a copy or a disk that ran out mid-file
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides))
    (problem,) = refused.value.problems
    assert problem.startswith(f"{last} cannot be read (RuntimeError: PytorchStreamReader failed")
    assert problem.endswith(
        "it was cut short or is not a checkpoint. Start over with resume=false (the run trains from step 0 in this "
        f"folder), or delete {last.parent}."
    )
    afresh = run(compose_config(*overrides, "resume=false"))
    assert afresh.resumed_from is None and afresh.steps == 6


def test_hydra_records_a_command_only_into_a_folder_it_runs_in(tmp_path):
    assert record_subdir(str(tmp_path / "new"), True) == ".hydra"
    (tmp_path / "results.json").write_text("{}")
    assert record_subdir(str(tmp_path), True) is None and record_subdir(str(tmp_path), False) is None
    # redone in place once its checks pass: the command that redid it is recorded as it finishes
    assert record_subdir(str(tmp_path), "force") is None
    (tmp_path / "results.json").unlink()
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert record_subdir(str(tmp_path), True) is None  # resumed: the command that started it stays its record
    assert record_subdir(str(tmp_path), False) == ".hydra"  # started over


def test_a_run_folder_that_cannot_be_made_is_named_with_why(tmp_path):
    (tmp_path / "a_file").write_text("")
    assert folder_problem(tmp_path / "a_file" / "run", "hydra.run.dir") == (
        f"hydra.run.dir={tmp_path / 'a_file' / 'run'} cannot be made: {tmp_path / 'a_file'} is a file, not a folder. "
        "Fix: hydra.run.dir=ANOTHER_FOLDER."
    )
    assert folder_problem(tmp_path / "new" / "run", "hydra.run.dir") is None
    assert list(tmp_path.iterdir()) == [tmp_path / "a_file"]  # trying leaves nothing behind
    (tmp_path / "outputs").symlink_to(tmp_path / "purged_scratch")  # a link whose target is gone
    assert folder_problem(tmp_path / "outputs" / "run", "hydra.run.dir") == (
        f"hydra.run.dir={tmp_path / 'outputs' / 'run'} cannot be made: {tmp_path / 'outputs'} is a link to "
        f"{tmp_path / 'purged_scratch'}, which does not exist. Fix: make that folder, or hydra.run.dir=ANOTHER_FOLDER."
    )
    (tmp_path / "outputs").unlink()
    if not sys.platform.startswith("linux"):
        return
    # a folder nobody may write, root included (a read-only folder does not stop root): Linux's /sys
    problem = folder_problem(Path("/sys/no_run"), "hydra.run.dir")
    assert problem is not None and problem.startswith(
        "hydra.run.dir=/sys/no_run cannot be made: /sys cannot be written ("
    )


def _app(*arguments: str) -> subprocess.CompletedProcess:
    return run_command([sys.executable, "-m", "theseus_pl", *arguments], timeout=600)


def test_ctrl_c_during_training_says_where_a_rerun_resumes_from(tiny_base, glue_dir, tmp_path):
    """It exited 1 and printed nothing (Lightning's own line is among the chatter the console hides)."""
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    folder = tmp_path / "cli"
    tests = str(Path(__file__).parents[1])  # raise_at_step.py, for the command's callback
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    interrupt = ["+callbacks.stop._target_=raise_at_step.InterruptAtStep", "+callbacks.stop.step=5"]
    stopped = run_command([sys.executable, "-m", "theseus_pl", *overrides, f"hydra.run.dir={folder}", *interrupt],
                          env=env, timeout=600)  # fmt: skip
    assert stopped.returncode == 1
    notice = f"Interrupted at step 5. Rerun the same command to resume from {folder / 'checkpoints' / 'last.ckpt'}."
    assert [line for line in (stopped.stdout + stopped.stderr).splitlines() if line.endswith(notice)], stopped.stderr
    # Resumed by a command of other settings that do not shape training: the folder's record becomes that command,
    # which finished the run (it kept the first command's benchmark.repeats=1 and its callback).
    resumed = run_command([sys.executable, "-m", "theseus_pl", *overrides, f"hydra.run.dir={folder}",
                           "benchmark.repeats=2"], env=env, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert read_run(folder / "results.json", TaskModelResults).resumed_from == str(folder / "checkpoints" / "last.ckpt")
    config = OmegaConf.load(folder / ".hydra" / "config.yaml")
    assert config.benchmark.repeats == 2 and "stop" not in config.callbacks
    assert "benchmark.repeats=2" in OmegaConf.load(folder / ".hydra" / "overrides.yaml")


@pytest.mark.slow
def test_the_command_line_keeps_a_finished_runs_record_and_refuses_what_it_cannot_run(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    folder = tmp_path / "cli"
    assert _app(*overrides, f"hydra.run.dir={folder}").returncode == 0
    record = {path.name: path.read_bytes() for path in (folder / ".hydra").iterdir()}
    again = _app(*overrides, f"hydra.run.dir={folder}", "benchmark.repeats=2")  # what runs after training only
    assert again.returncode == 0 and "holds a finished run (results.json); nothing was changed" in again.stdout
    # Other training settings: it would end as if it had run them, so it is refused, naming both values.
    other = _app(*overrides, f"hydra.run.dir={folder}", "optimizer.lr=0.5", "seed=7")
    assert other.returncode == 2 and other.stderr.splitlines()[1] == (
        f"- {folder} holds a finished run of other settings than this command's: optimizer.lr=0.001 there, 0.5 here; "
        "seed=42 there, 7 here; it would be left as it is. Fix: resume=force to redo it here with this command's "
        "settings, or hydra.run.dir=ANOTHER_FOLDER for a new run."
    )
    assert "seed=42 there, 7 here" in _app(*overrides, f"hydra.run.dir={folder}", "seed=7", "--check").stderr
    # resume=force refused by its checks: the finished run's results and record stay (they went before the checks)
    refused = _app(*overrides, f"hydra.run.dir={folder}", "resume=force", "theseus.successor_layers=10")
    assert refused.returncode == 2 and (folder / "results.json").is_file()
    assert {path.name: path.read_bytes() for path in (folder / ".hydra").iterdir()} == record
    checked = _app(*overrides, f"hydra.run.dir={folder}", "--check")
    assert f"outputs: {folder} holds a finished run, which the run would leave as it is" in checked.stdout
    # The predecessor is in the cache now: only the method's training is timed.
    assert "time of training: about " in checked.stdout and "predecessor's fine-tuning" not in checked.stdout
    # redone and finished: the record is the command that redid it
    assert _app(*overrides, f"hydra.run.dir={folder}", "resume=force", "benchmark.repeats=2").returncode == 0
    assert OmegaConf.load(folder / ".hydra" / "config.yaml").benchmark.repeats == 2
    assert "resume=force" in OmegaConf.load(folder / ".hydra" / "overrides.yaml")
    # refused in one line, exit 2, no traceback, no folder: a run folder behind a file, and a Trainer key mistyped
    (tmp_path / "a_file").write_text("")
    behind = _app(*overrides, f"hydra.run.dir={tmp_path / 'a_file' / 'run'}")
    typo = _app(*overrides, f"hydra.run.dir={tmp_path / 'typo'}", "+trainer.max_step=5", "--check")
    assert (behind.returncode, typo.returncode) == (2, 2)
    assert behind.stderr.splitlines()[1] == (
        f"- hydra.run.dir={tmp_path / 'a_file' / 'run'} cannot be made: {tmp_path / 'a_file'} is a file, not a "
        "folder. Fix: hydra.run.dir=ANOTHER_FOLDER."
    )
    assert typo.stderr.splitlines()[1:] == [
        "- trainer.max_step is no setting of Lightning's Trainer: did you mean trainer.max_steps or trainer.max_time?"
    ]
    assert "Traceback" not in behind.stderr + typo.stderr and not (tmp_path / "typo").exists()


def test_a_finished_run_whose_record_is_damaged_is_named_by_every_command_that_reads_it(
    tiny_base, glue_dir, tmp_path, capsys
):
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    run(compose_config(*overrides))
    results = tmp_path / "run" / "results.json"
    results.write_text(results.read_text()[:300])  # cut short
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides))
    (problem,) = refused.value.problems
    assert problem.startswith(f"{results} cannot be read (JSONDecodeError: ")
    assert problem.endswith("This folder's run finished, but its record is damaged: resume=force redoes the run in "
                            "place, or hydra.run.dir=ANOTHER_FOLDER runs it anew elsewhere.")  # fmt: skip
    (tmp_path / "run" / ".hydra").mkdir()
    OmegaConf.save(compose_config(*overrides), tmp_path / "run" / ".hydra" / "config.yaml")  # as Hydra records it
    capsys.readouterr()
    with pytest.raises(SystemExit) as deploying:
        deploy_main([str(tmp_path / "run"), "--dry-run"])
    assert deploying.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: {results} cannot be read (JSONDecodeError: ")
    assert run(compose_config(*overrides, "resume=force")).steps == 6
