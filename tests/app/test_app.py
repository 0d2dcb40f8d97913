"""The Hydra app: every config composes, the pipeline runs end to end, outputs are what the README says."""

import csv
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from command_runs import run_command, seed_machine_bf16
from huggingface_hub import ModelCard
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from sklearn.metrics import accuracy_score
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from theseus_pl.__main__ import cli
from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.config.kinds import EMBEDDING_MODEL, LANGUAGE_MODEL
from theseus_pl.app.config.resolvers import run_kind_name
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.methods.schedules import build_schedule
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, run
from theseus_pl.app.run.stages import run_hardware
from theseus_pl.core.io import PICKLED
from theseus_pl.data.tasks import glue_task, is_glue_task
from theseus_pl.data.text_corpus import text_source
from theseus_pl.lightning.callbacks import StoppedBelowScore

CONF = Path(__file__).parents[2] / "conf"
EXPERIMENTS = sorted(path.stem for path in (CONF / "experiment").glob("*.yaml"))


def test_every_glue_task_has_a_curriculum_and_a_constant_experiment():
    for task in ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"):
        assert {f"{task}_curriculum", f"{task}_constant"} <= set(EXPERIMENTS)
    assert "demo" in EXPERIMENTS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_instantiates(experiment, tiny_tokenizer, tmp_path):
    cfg = compose_config(f"+experiment={experiment}", f"paths.cache_dir={tmp_path}")
    if experiment.startswith("smollm2"):  # a decoder LM on text, not a task (tests/app/test_language_model_run.py)
        assert run_kind_name(cfg) == LANGUAGE_MODEL and cfg.method.name.startswith("lm_theseus")
        offline = "speeches of the 2012 US party conventions"  # the 1.7B experiment reads WikiText from the hub
        text = "the 'text' column of Salesforce/wikitext" if experiment == "smollm2_1b7_curriculum" else offline
        assert text_source(cfg.data).describe().startswith(text)
    elif run_kind_name(cfg) == EMBEDDING_MODEL:  # a sentence model on sentences (tests/app/test_embedding_runs.py)
        assert cfg.method.name.startswith("embedding_")
        tasks = [cfg.data.pairs] if cfg.data.get("pairs") else cfg.data.train_tasks  # labelled pairs, or sentences
        assert tasks and all(is_glue_task(task) for task in tasks)
    else:
        datamodule = instantiate(cfg.data, tokenizer=tiny_tokenizer)
        expected = "rotten_tomatoes" if experiment == "demo" else glue_task(experiment.split("_")[0]).name
        assert datamodule.task.name == expected
    assert build_schedule(**cfg.replacement).switch_step == cfg.schedule_steps
    assert cfg.schedule_steps < cfg.trainer.max_steps
    for callback in cfg.callbacks.values():
        instantiate(callback)
    if cfg.trainer.accelerator in ("auto", "cpu"):
        precision = run_hardware(
            cfg.trainer, Path(cfg.paths.cache_dir)
        ).precision  # trainer.precision=auto, as the run resolves it
        instantiate(cfg.trainer, logger=False, enable_checkpointing=False, precision=precision)


def test_rte_curriculum_has_the_papers_settings():
    cfg = compose_config("+experiment=rte_curriculum")
    assert cfg.model.base == "bert-base-uncased"
    assert cfg.theseus.successor_layers == 6 and cfg.theseus.init == "bottom"
    assert cfg.data.batch_size == 32 and cfg.optimizer.lr == 2e-5
    assert (cfg.finetune.epochs, cfg.finetune.lr) == (4, 2e-5)


@pytest.mark.parametrize("trainer", ["cpu", "gpu", "ddp"])
def test_trainer_configs_compose(trainer):
    cfg = compose_config(f"trainer={trainer}")
    assert cfg.trainer.accelerator == {"cpu": "cpu", "gpu": "gpu", "ddp": "gpu"}[trainer]
    if trainer != "cpu":
        assert cfg.trainer.precision == "bf16-mixed"


def test_user_overrides_have_the_documented_names():
    cfg = compose_config(
        "data.task=MRPC", "data.glue_dir=/g", "data.max_train_samples=10", "data.max_eval_samples=5", "model.base=b",
        "model.predecessor=p", "theseus.successor_layers=3", "replacement=constant", "replacement.p=0.7",
        "optimizer.lr=1e-5", "trainer.max_steps=7", "trainer.max_epochs=2", "seed=3",
    )  # fmt: skip
    assert (cfg.data.task, cfg.data.glue_dir, cfg.model.predecessor, cfg.replacement.p) == ("MRPC", "/g", "p", 0.7)
    curriculum = compose_config("replacement.b=0.1", "replacement.k=0.01")
    assert build_schedule(**curriculum.replacement).k == 0.01
    steps = compose_config("replacement=anti_curriculum", "replacement.steps_to_full=30")
    assert build_schedule(**steps.replacement).switch_step == 30


def test_a_run_bounded_by_epochs_records_its_epochs_as_its_budget(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("trainer.max_steps=")]
    results = run(compose_config(*overrides, "trainer.max_steps=-1", "trainer.max_epochs=2"))
    assert results.steps == 12  # two epochs of 24 rows in batches of 4
    assert (results.settings["trainer.max_steps"], results.settings["trainer.max_epochs"]) == (-1, 2)


def test_a_baseline_records_none_of_the_replacement_settings_it_ignores(tiny_base, glue_dir, tmp_path):
    # `-m method=theseus_constant,kd replacement.p=0.3,0.5` made two KD "grid points" that ran the same
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    overrides += ["replacement=constant", "replacement.p=0.7"]
    kd = run(compose_config(*overrides, "method=kd", f"paths.output_dir={tmp_path / 'kd'}")).settings
    assert not [key for key in kd if key.startswith(("replacement.", "theseus.finetune_shared", "theseus.lr_sched"))]
    theseus = run(compose_config(*overrides, f"paths.output_dir={tmp_path / 'theseus'}")).settings
    assert theseus["replacement.p"] == 0.7 and theseus["theseus.lr_schedule"] == "one_decay"


def test_an_unknown_experiment_or_value_is_refused():
    with pytest.raises(ConfigCompositionException):
        compose_config("+experiment=nope")
    with pytest.raises(ConfigCompositionException):
        compose_config("replacement=linear")


def test_pipeline_end_to_end_on_a_tiny_model(tiny_base, glue_dir, tmp_path):
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path))
    results = run(cfg)

    file = json.loads((tmp_path / "run" / "results.json").read_text())
    assert file == json.loads(json.dumps(results.to_dict())) and file["schema_version"] == 3
    for key in ("task", "retained", "speedup", "successor_dir", "params", "data"):
        assert key in file
    assert set(file["predecessor"]) >= {"score", "metrics"} and set(file["successor"]) >= {"score", "metrics"}
    written = read_run(tmp_path / "run" / "results.json", TaskModelResults)
    assert written == results
    assert written.task == "RTE"
    assert written.predecessor.metrics == {"accuracy": pytest.approx(written.predecessor.score / 100)}
    assert written.retained == pytest.approx(written.successor.score / written.predecessor.score)
    assert written.params.successor < written.params.predecessor
    assert (written.data.train_size, written.data.eval_size) == (24, 10)
    assert written.predecessor.origin == "fine-tuned"
    assert written.steps == 6 and "trainer.max_epochs" not in written.settings  # max_steps alone bounds it
    assert written.schedule == "curriculum: p = 0.3 at step 0, 1 from step 3" and written.switch_step == 3
    assert not (tmp_path / "run" / "checkpoints").exists()  # a finished run is never resumed: checkpoint.keep=false
    assert written.successor.best_checkpoint is None  # so its record names no checkpoint (it named the deleted file)
    assert (tmp_path / "run" / "csv" / "metrics.csv").is_file()
    card = ModelCard.load(Path(written.successor_dir) / "README.md")
    assert card.data.base_model is None  # a local folder, no model.hub_id: the card names no path instead
    assert card.data.datasets == ["nyu-mll/glue"] and card.data.pipeline_tag == "text-classification"
    assert [(r.metric_type, r.metric_value, r.dataset_config, r.dataset_split) for r in card.data.eval_results] == [
        ("accuracy", written.successor.metrics["accuracy"], "rte", "validation")
    ]
    assert "0 = `entailment`, 1 = `not_entailment`" in card.text
    assert str(tmp_path) not in card.content

    # The exported successor is a plain checkpoint that reproduces the score in results.json.
    successor = AutoModelForSequenceClassification.from_pretrained(written.successor_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(written.successor_dir)
    assert successor.config.num_hidden_layers == 2
    dev = [line.split("\t") for line in (glue_dir / "RTE" / "dev.tsv").read_text().splitlines()[1:]]
    with torch.no_grad():
        inputs = tokenizer([r[1] for r in dev], [r[2] for r in dev], padding=True, return_tensors="pt")
        predicted = successor(**inputs).logits.argmax(-1)
    labels = [("entailment", "not_entailment").index(r[3]) for r in dev]
    assert 100 * accuracy_score(labels, predicted) == pytest.approx(written.successor.score, abs=1e-4)

    # A second run of the same setting reuses the cached predecessor instead of fine-tuning again; this one keeps its
    # checkpoints, as asked.
    kept = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path, output="run2"), "checkpoint.keep=true"]
    again = run(compose_config(*kept))
    assert (tmp_path / "run2" / "checkpoints" / "last.ckpt").is_file()
    assert again.successor.best_checkpoint and Path(again.successor.best_checkpoint).is_file()
    assert again.predecessor.origin == "cache"
    assert again.predecessor.dir == written.predecessor.dir
    assert [p.name.startswith(".") for p in (tmp_path / "cache" / "predecessors").iterdir()].count(False) == 1


def test_an_interrupted_run_resumes_from_its_latest_validation(tiny_base, glue_dir, tmp_path, recwarn):
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)  # validates every 2 of 6 steps
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *killed))
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == 4  # whatever its score
    recwarn.clear()
    resumed = run(compose_config(*overrides))
    # Lightning's "Previous log files ... will be deleted" was untrue (the rows are carried over), and its notice of
    # a checkpoint folder that is not empty named the file the run resumes from
    assert not [str(w.message) for w in recwarn if "is not empty" in str(w.message)]
    assert resumed.resumed_from == str(last)
    assert resumed.steps == 6
    assert not last.parent.exists()  # kept while unfinished, deleted once the run has finished
    run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path, output="whole")))
    assert logged(tmp_path / "run") == logged(tmp_path / "whole")  # every row once: none lost, none twice


def logged(folder: Path) -> list[tuple[int, list[str]]]:
    """Each row of a run's CSV log: its step and the metrics it holds."""
    with (folder / "csv" / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [(int(row["step"]), sorted(key for key, value in row.items() if value and key != "step")) for row in rows]


def test_a_finished_run_folder_is_left_untouched_unless_forced(tiny_base, glue_dir, tmp_path):
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    first = run(compose_config(*overrides))
    folder = tmp_path / "run"
    files = {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}
    again = run(compose_config(*overrides))
    assert again == first and again.folder == folder  # read back from its results.json
    assert {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()} == files
    stale = folder / "checkpoints" / "best-step999.ckpt"
    stale.parent.mkdir()  # as a run with checkpoint.keep=true leaves it
    stale.write_bytes(b"from the old run")
    # an old run's pickled successor (a custom factory's) was loaded and scored in place of the new safetensors, and
    # its ONNX files published beside a model they are not
    old_files = [folder / "successor" / PICKLED, folder / "successor" / "onnx" / "model.onnx"]
    old_files[1].parent.mkdir()
    for path in old_files:
        path.write_bytes(b"from the old run")
    # a redo refused by its checks leaves the finished run as it was: its results, checkpoints and successor
    with pytest.raises(RunRefused, match=r"theseus\.successor_layers=10 must be between 1"):
        run(compose_config(*overrides, "resume=force", "theseus.successor_layers=10"))
    assert read_run(folder / "results.json", TaskModelResults) == first and stale.exists()
    assert plan(compose_config(*overrides, "resume=force", "check_steps=0"))[-1] == (
        f"outputs: {folder} holds a finished run, which resume=force redoes: its results, checkpoints and successor "
        "go as the run starts"
    )
    redone = run(compose_config(*overrides, "resume=force"))
    assert redone.resumed_from is None and redone.steps == 6
    assert not stale.exists() and not any(path.exists() for path in old_files)
    assert redone.successor.format == "transformers"
    with pytest.raises(ValueError, match=r"resume='maybe' must be true \(continue\), false"):
        run(compose_config(*overrides, "resume=maybe"))


def test_bad_input_fails_before_any_training(tiny_base, glue_dir, tmp_path):
    base = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    with pytest.raises(RunRefused, match=r"model\.predecessor='/nowhere/model' \(model and tokenizer\): no such"):
        run(compose_config(*base, "model.predecessor=/nowhere/model"))
    with pytest.raises(RunRefused, match=r"theseus\.successor_layers=5 must be between 1 and the predecessor's 4"):
        run(compose_config(*base, "theseus.successor_layers=5"))
    with pytest.raises(RunRefused, match="is not a folder"):
        run(compose_config(*base, f"data.glue_dir={tmp_path / 'missing'}"))
    assert not (tmp_path / "cache" / "predecessors").exists()


def test_the_command_line_writes_every_output_into_the_run_folder(tiny_base, glue_dir, tmp_path):
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    folder = tmp_path / "cli"
    seed_machine_bf16(tmp_path / "cache")  # a real process: it starts knowing the machine's measurement
    completed = subprocess.run(
        [sys.executable, "-m", "theseus_pl", *overrides, f"hydra.run.dir={folder}"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "predecessor" in completed.stdout + completed.stderr
    for path in (".hydra/config.yaml", "results.json", "successor/config.json", "successor/README.md",
                 "successor/tokenizer.json", "csv/metrics.csv"):  # fmt: skip
        assert (folder / path).is_file(), path
    assert not (folder / "checkpoints").exists()  # deleted once the run has finished (checkpoint.keep=false)
    # the successor says what it was trained on, copied away from its run too (submit and deploy read it)
    assert json.loads((folder / "successor" / "config.json").read_text())["finetuning_task"] == "RTE"


def test_a_run_folder_given_as_paths_output_dir_is_hydras_run_folder(tiny_base, glue_dir, tmp_path):
    """Given on the command line, ``paths.output_dir=DIR`` got the results while Hydra recorded the command and wrote
    the log into a folder of its own, ``outputs/<task>/<date>/``, which a refused run (or ``--check``) left behind."""
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)  # paths.output_dir={tmp_path}/run
    folder = tmp_path / "run"
    refused = run_command([sys.executable, "-m", "theseus_pl", *overrides, "seed=-1"], cwd=tmp_path, timeout=300)
    assert refused.returncode == 2 and "- seed=-1 " in refused.stderr, refused.stderr[-2000:]
    assert not folder.exists() and not (tmp_path / "outputs").exists()  # the folder made for it is removed
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")  # a folder that held anything stays, with the refused command's record
    refused = run_command([sys.executable, "-m", "theseus_pl", *overrides, "seed=-1"], cwd=tmp_path, timeout=300)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert (folder / ".hydra" / "config.yaml").is_file() and (folder / "__main__.log").is_file()
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (["-m", "paths.output_dir=out", "seed=1,2"], "paths.output_dir=out: a multirun's jobs each run in a folder "
         "of their own, in the sweep's folder: choose that with hydra.sweep.dir=out (each job's name in it: "
         "hydra.sweep.subdir)."),
        (["hydra.mode=MULTIRUN", "paths.output_dir=out", "seed=1,2"], "paths.output_dir=out: a multirun's jobs each "
         "run in a folder of their own, in the sweep's folder: choose that with hydra.sweep.dir=out (each job's name "
         "in it: hydra.sweep.subdir)."),
        (["paths.output_dir=out", "hydra.run.dir=elsewhere"], "paths.output_dir=out and hydra.run.dir=elsewhere name "
         "two run folders: Hydra's record (.hydra/) and the log would go to one, the results and the successor to the "
         "other. Give one: hydra.run.dir=out."),
    ],
    ids=["multirun", "hydra.mode=MULTIRUN", "two folders"],
)  # fmt: skip
def test_paths_output_dir_that_cannot_be_the_runs_one_folder_is_refused_before_hydra(
    arguments, problem, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["theseus_pl", *arguments])
    with pytest.raises(SystemExit) as exited:
        cli()
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["The command line cannot be read:", f"- {problem}"]
    assert not list(tmp_path.iterdir())


def test_a_run_whose_training_diverges_says_so_in_one_line_exits_1_and_records_nothing(tiny_base, glue_dir, tmp_path):
    """At optimizer.lr=1e8 every weight turns NaN within steps; such a run printed a successor score (a NaN
    classifier's one class) and exited 0, and report picked it as the best."""
    unset = ("paths.output_dir", "optimizer.lr")
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith(unset)]
    folder = tmp_path / "cli"
    completed = run_command(
        [sys.executable, "-m", "theseus_pl", *overrides, "optimizer.lr=1e8", f"hydra.run.dir={folder}"], timeout=600
    )
    assert completed.returncode == 1, completed.stderr[-2000:]
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith("The training diverged at step ") and last.endswith(
        "Nothing was recorded. Lower optimizer.lr (now 1e+08) or check the training data."
    )
    assert "Traceback" not in completed.stderr
    assert not (folder / "results.json").exists() and not (folder / "successor").exists()


def test_a_run_asked_for_a_score_it_has_not_reached_half_way_stops_there_and_records_nothing(
    tiny_base, glue_dir, tmp_path
):
    """``callbacks.stop_below``, as a search asks it of a trial: no tiny run scores over 101 points."""
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "callbacks.stop_below.below=101")
    with pytest.raises(StoppedBelowScore, match=r"^Stopped at step 4 of 6: val/score is \d+\.\d\d, under the 101 "):
        run(cfg)
    assert not (tmp_path / "run" / "results.json").exists() and not (tmp_path / "run" / "successor").exists()


def test_a_home_shorthand_in_an_override_gets_a_fix_not_a_lexer_error(tmp_path):
    completed = run_command(
        [sys.executable, "-m", "theseus_pl", "data.glue_dir=~/glue_data", "--cfg", "job"], timeout=300, cwd=tmp_path
    )
    assert completed.returncode == 2
    assert "data.glue_dir=~/glue_data: Hydra's override grammar does not accept an unquoted ~" in completed.stderr
    assert "data.glue_dir=$HOME/glue_data" in completed.stderr and "LexerNoViableAlt" not in completed.stderr


def test_help_describes_the_tool_and_lists_every_experiment_and_sweep(tmp_path):
    completed = run_command([sys.executable, "-m", "theseus_pl", "--help"], timeout=300, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    text = completed.stdout
    assert text.startswith("theseus_pl: compress Transformers by progressive module replacing")
    listed = {line.split(":")[0]: line.split(": ")[1].split(", ") for line in text.splitlines() if ": " in line}
    assert listed["experiment"] == EXPERIMENTS
    assert listed["sweep"] == sorted(path.stem for path in (CONF / "sweep").glob("*.yaml"))
    assert "Resume" in text and "results.json" in text
    scripts = [script.name for script in importlib.metadata.entry_points(group="console_scripts")]
    commands = [name for name in scripts if name.startswith("theseus-pl-")]  # report, deploy, publish, ...
    assert commands
    for command in commands:
        assert command in text, f"the help does not name {command}"
    assert len(text.splitlines()) < 60  # a page, not the composed config
