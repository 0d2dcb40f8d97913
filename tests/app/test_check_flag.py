"""``python -m theseus_pl ... --check``: every check a run makes before compute, and its plan, without running it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from test_app import EXPERIMENTS

from theseus_pl.app.run import projection
from theseus_pl.app.run.pipeline import plan, run
from theseus_pl.app.run.projection import padded_tokens, projection_line, representative_batches, sampled_rates
from theseus_pl.core.schedules import CurriculumSchedule
from theseus_pl.core.timing import Timings


def app(cwd, *arguments: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "WANDB_MODE": "offline", "THESEUS_PL_CACHE": str(cwd / "cache")}
    return run_command([sys.executable, "-m", "theseus_pl", *arguments], cwd=cwd, env=environment, timeout=600)


@pytest.mark.slow
def test_check_prints_the_plan_and_writes_no_run_folder(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    completed = app(tmp_path, *overrides, "--check")
    assert completed.returncode == 0, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    header = "The run passes every check before compute (nothing was trained, no run folder was made). It would run:"
    # Log lines may come first: a busy machine's warning beside bf16's measurement is true, and printed before.
    assert header in lines and all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines[: lines.index(header)])
    plan = dict(line.strip().split(": ", 1) for line in lines[lines.index(header) + 1 :])
    assert plan["kind"] == "task model (an encoder compressed on a task)"
    assert plan["data"].startswith("RTE, GLUE RTE, from the classic GLUE files: ")
    cache = tmp_path / "cache" / "predecessors"
    assert re.fullmatch(rf".* \(fine-tuned on the task first, 6 steps, into the cache: {cache}/RTE-[0-9a-f]{{16}}\), "
                        "4 layers", plan["predecessor"])  # fmt: skip
    assert plan["training"].startswith("6 optimizer steps of 4 rows (24 rows")
    assert plan["method"] == "theseus, 2 layers kept"
    assert plan["schedule"].startswith("curriculum: p = ") and plan["precision"]
    assert plan["outputs"].startswith(f"would be written to {tmp_path / 'outputs' / 'RTE'}")
    # The projected times: 3 steps of each timed (the predecessor is still to be fine-tuned: its epochs too).
    epochs, batches_an_epoch = 1, -(-24 // 4)  # tiny_run_overrides: 24 training rows, batches of 4
    # Validation counted: after each epoch of the fine-tuning, every 2 steps of the method's 6; then the final scoring.
    timed = (r"about \d+ s \(([\d,]+) batches at ([\d.e-]+) s; 3 timed on the run's own batches, [\d.e-]+-[\d.e-]+ s; "
             r"(\d+) dev passes at ([\d.e-]+) s \(validation and the final scoring\); export not counted"
             r"(; other processes .+)?\)")  # fmt: skip
    fine_tuning = re.fullmatch(timed, plan["time of the predecessor's fine-tuning"])
    assert fine_tuning and int(fine_tuning[1]) == epochs * batches_an_epoch and float(fine_tuning[2]) > 0
    assert int(fine_tuning[3]) == epochs + 1 and float(fine_tuning[4]) > 0
    training = re.fullmatch(timed, plan["time of training"])
    assert training and int(training[1]) == 6 and int(training[3]) == 6 // 2 + 1 and float(training[4]) > 0
    assert not (tmp_path / "outputs").exists()  # nothing of the run is left: no folder, no log
    assert "val_dataloader" not in completed.stderr  # the timed steps' own fit skips validation on purpose
    assert not (tmp_path / "cache" / "predecessors").exists()  # the predecessor was not fine-tuned
    assert not list((tmp_path / "cache").glob("theseus-pl-stand-in-*"))  # its stand-in is gone
    untimed = app(tmp_path, *overrides, "check_steps=0", "--check")
    assert untimed.returncode == 0 and "time of" not in untimed.stdout


def _files(folder):
    return {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


KILLED_LOG = "[2026-12-01 10:00:00,000][theseus_pl][INFO] - Training in fp32: this machine has no bf16.\n"


def _killed_run(folder):
    """What a run killed while its predecessor was fine-tuned leaves: ``.hydra/`` and its log, no more."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (folder / "__main__.log").write_text(KILLED_LOG)
    return folder


@pytest.mark.slow
def test_a_folder_holding_anything_is_kept_by_a_refusal_and_check_writes_nothing_into_it(tiny_base, glue_dir, tmp_path):
    """A refused rerun into a killed run's folder, and ``--check``, deleted it; into a folder holding a user's own
    file, ``--check`` wrote ``.hydra/`` and a log while it said nothing was written."""
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    killed = _killed_run(tmp_path / "killed")
    refused = app(tmp_path, *overrides, "seed=-1", f"hydra.run.dir={killed}")
    assert refused.returncode == 2 and "- seed=-1 " in refused.stderr, refused.stderr[-2000:]
    assert (killed / "__main__.log").read_text().startswith(KILLED_LOG)  # the folder and its log stay
    checked = _killed_run(tmp_path / "checked")
    before = _files(checked)
    completed = app(tmp_path, *overrides, f"hydra.run.dir={checked}", "check_steps=0", "--check")  # no timing
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert _files(checked) == before
    own = tmp_path / "own"
    own.mkdir()
    (own / "notes.txt").write_text("mine")
    assert app(tmp_path, *overrides, f"hydra.run.dir={own}", "check_steps=0", "--check").returncode == 0
    assert _files(own) == {Path("notes.txt"): b"mine"}


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
    kind = cfg.data.get("kind")  # a decoder-LM or sentence-embedding run has no task: its kind names the folder
    assert folder[0] == "outputs" and folder[1] == (kind or cfg.data.get("task") or "rotten_tomatoes")


def test_a_theseus_run_is_timed_at_rates_spread_over_its_phases():
    """A replacing step costs more than a successor-alone step: the timed steps take the rates of the midpoints of
    equal stretches of the run, phase 2's included."""
    schedule = CurriculumSchedule.from_steps_to_full(b=0.3, steps_to_full=200)  # p = 1 from step 200 of 400
    rates = sampled_rates(schedule, steps=400, timed=4)
    assert rates == [schedule.rate(50), schedule.rate(150), 1.0, 1.0] and 0.3 < rates[0] < rates[1] < 1
    assert sampled_rates(None, steps=400, timed=4) is None  # a method without a schedule: the rate is not set
    assert sampled_rates(schedule, steps=400, timed=2, start=100) == [schedule.rate(175), 1.0]  # a resumed run's rest


def test_a_resumed_run_is_projected_for_the_steps_it_has_left(tiny_base, glue_dir, tmp_path):
    """A run killed at step 4 of 6: ``--check`` timed all 6 steps, as if it started over."""
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "trainer.precision=32-true", "check_steps=2"]
    with pytest.raises(RuntimeError, match="planned failure at step 4"):
        run(compose_config(*overrides, "+callbacks.kill._target_=raise_at_step.RaiseAtStep", "+callbacks.kill.step=4"))
    lines = dict(line.split(": ", 1) for line in plan(compose_config(*overrides)))
    assert lines["outputs"].startswith(f"{tmp_path / 'run'}, resuming from step 4")
    assert re.match(r"about \d+ s \(2 batches at [\d.e-]+ s; 2 timed on the run's own batches",
                    lines["time of the rest of training, from step 4"])  # fmt: skip


def test_the_projection_is_the_mean_step_times_the_batches_plus_the_dev_passes_and_says_when_the_machine_was_busy():
    alone = projection_line("training", 2_000, Timings({"step": [2.0, 3.0, 4.0]}, other_cores=0.05))
    assert alone == ("time of training: about 1 h 40 min (2,000 batches at 3 s; 3 timed on the run's own batches, "
                     "2-4 s; validation and export not counted)")  # fmt: skip
    assert projection_line("training", 10, Timings({"step": [0.5]}, None)).startswith("time of training: about 5 s (")
    validated = projection_line("training", 2_000, Timings({"step": [3.0], "validation": [40.0]}, None), passes=21)
    assert validated == ("time of training: about 1 h 54 min (2,000 batches at 3 s; 1 timed on the run's own batches; "
                         "21 dev passes at 40 s (validation and the final scoring); export not counted)")  # fmt: skip
    once = projection_line("training", 10, Timings({"step": [1.0], "validation": [2.0]}, None), passes=1)
    assert once.endswith("1 dev pass at 2 s (validation and the final scoring); export not counted)")
    busy = projection_line("training", 100, Timings({"step": [1.0]}, other_cores=1.4))
    assert busy.endswith("other processes kept 1.4 cores busy meanwhile: the time is not this run's alone)")


@pytest.mark.slow
@pytest.mark.parametrize(
    "method", [("method=theseus",), ("method=fine_tuning", "theseus.init=every_other"), ("method=kd",)]
)
def test_the_paper_protocols_runs_print_their_projected_time(method, tiny_base, glue_dir, tmp_path):
    """``rte_curriculum`` and its baselines (a tiny stand-in for BERT-base): the plan times the predecessor's
    fine-tuning and the method's steps, and leaves neither a predecessor nor its stand-in in the cache."""
    cfg = compose_config("+experiment=rte_curriculum", *tiny_run_overrides(tiny_base, glue_dir, tmp_path),
                         "model.predecessor=null", "check_steps=2", *method)  # fmt: skip
    lines = dict(line.split(": ", 1) for line in plan(cfg))
    assert re.match(
        r"about \d+ s \(6 batches at [\d.e-]+ s; 2 timed on the run's own batches, ", lines["time of training"]
    )
    assert lines["time of the predecessor's fine-tuning"].startswith("about ")
    assert not (tmp_path / "cache" / "predecessors").exists()
    assert not list((tmp_path / "cache").glob("theseus-pl-stand-in-*"))


def test_the_predecessors_fine_tuning_is_timed_as_it_runs_without_the_methods_gradient_clipping(
    tiny_base, glue_dir, tmp_path, monkeypatch
):
    """Fine-tuning the predecessor clips no gradients (the paper's recipe); the method's trainer does
    (``trainer.gradient_clip_val``): each is timed under its own settings."""
    timed_settings = []

    def recorded(module, datamodule, trainer_settings, timed, rates):
        timed_settings.append(trainer_settings)
        return Timings({"step": [1.0] * timed}, None)

    monkeypatch.setattr(projection, "timed_steps", recorded)
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "model.predecessor=null",
                         "trainer.gradient_clip_val=0.5")  # fmt: skip
    lines = dict(line.split(": ", 1) for line in plan(cfg))
    assert lines["time of the predecessor's fine-tuning"].startswith("about ")
    fine_tuning, training = timed_settings
    assert fine_tuning.get("gradient_clip_val") is None and training["gradient_clip_val"] == 0.5


def test_the_timed_batches_stand_for_the_runs_sizes_and_the_loader_is_read_once():
    """Length-grouped batches differ in size: the timed ones are the midpoints of equal stretches of them sorted by
    padded tokens, after the largest (the untimed step); the run's order is read once (a second read is another
    order)."""
    lengths = [7, 1, 9, 3, 5, 2, 8, 4, 6, 10]  # ten batches of 2 rows, in the shuffled order the run would train on
    order = ({"input_ids": torch.zeros(2, length, dtype=torch.long)} for length in lengths)  # readable once only
    chosen = representative_batches(order, 3)
    assert [padded_tokens(batch) // 2 for batch in chosen] == [10, 2, 6, 9]  # sorted ranks 1, 5, 8 of 0-9
    few = representative_batches([{"input_ids": torch.zeros(1, n)} for n in (4, 2)], 3)
    assert [padded_tokens(batch) for batch in few] == [4, 2, 4, 4]  # fewer batches than steps: repeated
    assert padded_tokens({"features": torch.zeros(3, 5)}) == 1  # no token ids: every batch weighs the same
