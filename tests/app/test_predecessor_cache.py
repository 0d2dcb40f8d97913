"""The predecessor cache key: every input that changes the fine-tuned predecessor changes it, nothing else does."""

import json
import logging
import os
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from command_runs import Started, start_command
from filelock import FileLock
from hydra.utils import instantiate
from omegaconf import OmegaConf
from raise_at_step import RaiseAtStep
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from theseus_pl.app.kinds.task_model import run as task_model_run
from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.predecessors import resumable_training
from theseus_pl.app.predecessors.classifier import cache_key, cached_predecessor_folder, fine_tune, load_classifier
from theseus_pl.app.predecessors.resumable_training import WORK_VERSIONS, interrupted_at, library_versions, work_folder
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, run
from theseus_pl.app.run.stages import evaluation_settings, run_hardware
from theseus_pl.core.precision import resolve_precision
from theseus_pl.data.cache_entry import MANIFEST, write_manifest
from theseus_pl.data.tasks import glue_task
from theseus_pl.lightning.evaluation import evaluate


def key_of(*overrides: str) -> str:
    """The key as the app computes it for ``python -m theseus_pl <overrides>``."""
    cfg = compose_config(*overrides)
    datamodule = instantiate(cfg.data, tokenizer=cfg.model.base)
    finetune = OmegaConf.to_container(cfg.finetune)
    return cache_key(
        cfg.model.base, datamodule, finetune, cfg.seed, run_hardware(cfg.trainer, Path(cfg.paths.cache_dir)).precision
    )


@pytest.fixture
def base_overrides(tiny_base, glue_dir, tmp_path):
    return tiny_run_overrides(tiny_base, glue_dir, tmp_path)


# The precision trainer.precision=auto does not pick on this machine (the key holds the resolved precision), put in as
# the test runs: taken as this module was collected, the bf16 measurement ran in both workers at once, where each saw
# the other busy and measured again, a second apart, five times (10 s of every run's start on an AVX-512 BF16 CPU).
NOT_AUTO = "<not auto>"


def not_auto_precision() -> str:
    return "32-true" if resolve_precision("auto", "cpu").precision == "bf16-mixed" else "bf16-mixed"


@pytest.mark.parametrize(
    "change",
    [
        "finetune.lr=1e-4", "finetune.epochs=2", "finetune.weight_decay=0.1", "finetune.warmup_ratio=0.1",
        "seed=7", "data.batch_size=8", "data.max_train_samples=12", "data.max_eval_samples=5", "data.max_length=16",
        "data.group_by_length=true", "data.pad_to_max_length=true", f"trainer.precision={NOT_AUTO}",
    ],
)  # fmt: skip
def test_each_fine_tuning_input_gives_a_new_key(base_overrides, change):
    change = change.replace(NOT_AUTO, not_auto_precision())
    assert key_of(*base_overrides, change) != key_of(*base_overrides)


def test_compression_settings_keep_the_key(base_overrides):
    unrelated = [
        "optimizer.lr=5e-5", "replacement.b=0.1", "theseus.successor_layers=3", "trainer.max_steps=99",
        "schedule_steps=4", "data.eval_batch_size=3", "method=kd", "benchmark.repeats=3",
    ]  # fmt: skip
    assert key_of(*base_overrides, *unrelated) == key_of(*base_overrides)


def test_base_model_and_data_files_are_part_of_the_key(base_overrides, tiny_base, glue_dir, tmp_path):
    before = key_of(*base_overrides)
    train = glue_dir / "RTE" / "train.tsv"
    train.write_text(train.read_text().replace("the cat", "a cat", 1))
    after_data = key_of(*base_overrides)
    assert after_data != before

    weights = tiny_base / "model.safetensors"
    changed = bytearray(weights.read_bytes())
    changed[-1] ^= 1  # one bit of one weight
    weights.write_bytes(changed)
    assert key_of(*base_overrides) != after_data


def test_copied_moved_or_touched_inputs_keep_their_key(base_overrides, tiny_base, glue_dir, tmp_path):
    # Only the bytes count: a data folder provided afresh, or a model folder copied elsewhere, reuses its cache.
    before = key_of(*base_overrides)
    for path in (glue_dir / "RTE" / "train.tsv", tiny_base / "model.safetensors"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert key_of(*base_overrides) == before
    base_copy = shutil.copytree(tiny_base, tmp_path / "another_base")
    glue_copy = shutil.copytree(glue_dir, tmp_path / "another_glue")
    assert key_of(*base_overrides, f"model.base={base_copy}", f"data.glue_dir={glue_copy}") == before


def test_a_predecessor_that_diverged_is_not_cached(base_overrides, tmp_path):
    with pytest.raises(RuntimeError, match=r"into the predecessor diverged \(.*\); nothing was cached"):
        run(compose_config(*base_overrides, "finetune.lr=1e30"))
    cached = tmp_path / "cache" / "predecessors"
    assert not cached.exists() or not [path for path in cached.iterdir() if not path.name.startswith(".")]


def test_truncated_cache_files_are_rebuilt_by_the_next_run(base_overrides, tmp_path, caplog):
    first = run(compose_config(*base_overrides))
    weights = Path(first.predecessor.dir) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    (arrow,) = (tmp_path / "cache" / "tokenized").glob("RTE-train-*/*.arrow")
    arrow.write_bytes(arrow.read_bytes()[:-100])

    with caplog.at_level(logging.WARNING, logger="theseus_pl.data.cache_entry"):
        again = run(compose_config(*base_overrides, f"paths.output_dir={tmp_path / 'again'}"))
    damaged = [record.getMessage() for record in caplog.records]
    assert any(f"at {weights.parent} is damaged (model.safetensors has 1000 bytes" in m for m in damaged), damaged
    assert any(f"at {arrow.parent} is damaged ({arrow.name} has" in m for m in damaged), damaged
    assert again.predecessor.origin == "fine-tuned"
    assert again.predecessor.score == first.predecessor.score  # the same settings, the same predecessor


def test_two_jobs_at_once_fine_tune_their_shared_predecessor_once(base_overrides, tmp_path):
    def job(name: str) -> Started:
        folder = tmp_path / name
        # The precision pinned: under trainer.precision=auto each job measures bf16 against fp32 at start, and two
        # jobs measuring side by side can resolve differently, which keys two different predecessors (seen in CI).
        command = [sys.executable, "-m", "theseus_pl", *base_overrides, "finetune.epochs=3",
                   "trainer.precision=32-true", f"paths.output_dir={folder}", f"hydra.run.dir={folder}"]  # fmt: skip
        return start_command(command)  # a fork of the tests' command process, as run_command's, not waited for

    jobs = [job("a"), job("b")]
    for done in [job.wait(timeout=300) for job in jobs]:
        assert done.returncode == 0, done.stderr[-3000:]
    origins = sorted(
        read_run(tmp_path / name / "results.json", TaskModelResults).predecessor.origin for name in ("a", "b")
    )
    assert origins == ["cache", "fine-tuned"]
    assert len([p for p in (tmp_path / "cache" / "predecessors").iterdir() if not p.name.startswith(".")]) == 1


def test_a_cached_predecessor_brings_the_dev_metrics_measured_when_it_was_made(base_overrides, tmp_path, monkeypatch):
    first = run(compose_config(*base_overrides))
    folder = Path(first.predecessor.dir)
    made = json.loads((folder / "predecessor.json").read_text())
    assert made["task"] == "RTE"  # what a cache folder given as model.predecessor is checked by
    cfg = compose_config(*base_overrides)
    datamodule = instantiate(cfg.data, tokenizer=cfg.model.base)
    now = evaluate(
        load_classifier(str(folder), datamodule.task),
        datamodule,
        evaluation_settings(cfg.trainer, run_hardware(cfg.trainer, Path(cfg.paths.cache_dir)).precision),
    )
    assert made["dev_metrics"] == pytest.approx(now, abs=1e-6)
    assert first.predecessor.score == pytest.approx(now["score"], abs=1e-6)

    evaluated = []

    monkeypatch.setattr(
        task_model_run, "evaluate", lambda model, *args: evaluated.append(model) or evaluate(model, *args)
    )
    again = run(compose_config(*base_overrides, f"paths.output_dir={tmp_path / 'again'}"))
    assert again.predecessor == replace(first.predecessor, origin="cache")
    assert len(evaluated) == 1  # the successor; the predecessor's metrics came with it

    # An entry cached before the metrics were recorded is evaluated, as it always was.
    del made["dev_metrics"]
    (folder / "predecessor.json").write_text(json.dumps(made))
    (folder / MANIFEST).unlink()
    write_manifest(folder)
    older = run(compose_config(*base_overrides, f"paths.output_dir={tmp_path / 'older'}"))
    assert older.predecessor.origin == "cache" and len(evaluated) == 3
    assert older.predecessor.score == pytest.approx(now["score"], abs=1e-6)


def test_a_base_saved_in_half_precision_is_fine_tuned_in_fp32(tiny_base, tmp_path):
    """transformers 5 loads a checkpoint in the dtype it was saved in: an fp16 base (the offline pack's, or a hub
    model stored so) would train fp16 weights, which AdamW's small steps leave unchanged."""
    half = tmp_path / "half"
    AutoModelForSequenceClassification.from_pretrained(tiny_base).half().save_pretrained(half)
    AutoTokenizer.from_pretrained(tiny_base).save_pretrained(half)
    model = load_classifier(str(half), glue_task("RTE"), new_head=True)
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}


def test_the_predecessors_fine_tuning_shows_the_runs_progress_bar_line_by_line(tiny_base, glue_dir, tmp_path, capsys):
    """tqdm's bar, as the run's own fit: Lightning's default where ``rich`` is installed writes nothing to a log file
    until the fit ends, and at base size the fine-tuning is an hour of silence."""
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path))
    datamodule = instantiate(cfg.data, tokenizer=cfg.model.base)
    fine_tune(cfg.model.base, datamodule, OmegaConf.to_container(cfg.finetune), tmp_path / "predecessor",
              evaluation_settings(cfg.trainer, "32-true"), tmp_path / "work")  # fmt: skip
    shown = capsys.readouterr()
    assert re.search(r"Epoch 0: 100%\|█+\| 6/6 ", shown.out + shown.err)  # 24 training rows, 4 a batch; Rich: "0/0 ━"


def test_a_dev_pass_shows_the_runs_progress_bar_line_by_line(tiny_base, glue_dir, tmp_path, capsys):
    """Scoring the successor and the predecessor on dev, as the fine-tuning: tqdm's bar, not Rich's silent one; none
    where the run turns its bars off."""
    for shows in (True, False):
        cfg = compose_config(
            *tiny_run_overrides(tiny_base, glue_dir, tmp_path), f"+trainer.enable_progress_bar={shows}"
        )
        datamodule = instantiate(cfg.data, tokenizer=cfg.model.base)
        evaluate(load_classifier(cfg.model.base, datamodule.task, new_head=True), datamodule,
                 evaluation_settings(cfg.trainer, "32-true"))  # fmt: skip
        shown = capsys.readouterr()
        bar = re.search(r"Validation DataLoader 0: 100%\|█+\| \d+/\d+ ", shown.out + shown.err)
        assert bool(bar) == shows


class StepsTrained(pl.Callback):
    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        self.steps.append(trainer.global_step)


def test_a_fine_tuning_interrupted_midway_continues_where_it_stopped(
    tiny_base, glue_dir, tmp_path, monkeypatch, recwarn
):
    """Killed after step 8 of 12 (mid-epoch), it trains the last 4 from its checkpoint: without dropout, to the same
    weights as an uninterrupted fine-tuning (data order, optimizer, schedule and best epoch restored); ``--check``
    says it would continue. Lightning's notice that the work folder is not empty (its own files) is not shown."""
    config = json.loads((tiny_base / "config.json").read_text())
    config |= {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}  # dropout draws anew after a resume
    (tiny_base / "config.json").write_text(json.dumps(config))
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "finetune.epochs=2",
                         "trainer.precision=32-true", "check_steps=0")  # 6 batches an epoch  # fmt: skip
    finetune = OmegaConf.to_container(cfg.finetune)
    cached = cached_predecessor_folder(cfg.model.base, instantiate(cfg.data, tokenizer=cfg.model.base), finetune,
                                       cfg.seed, Path(cfg.paths.cache_dir), "32-true")  # fmt: skip

    def fine_tuned(name: str, work: Path) -> Path:
        torch.manual_seed(0)  # the new head, as the run's seed would
        datamodule = instantiate(cfg.data, tokenizer=cfg.model.base)  # a new process's
        fine_tune(cfg.model.base, datamodule, finetune, tmp_path / name, evaluation_settings(cfg.trainer, "32-true"),
                  work, every_n_steps=4)  # fmt: skip
        return tmp_path / name

    with monkeypatch.context() as patched:
        patched.setattr(resumable_training, "progress_bars", lambda settings: [RaiseAtStep(8)])
        with pytest.raises(RuntimeError, match="planned failure at step 8"):
            fine_tuned("resumed", work_folder(cached))
    assert interrupted_at(work_folder(cached)) == 8  # every 4 steps: kept when the fine-tuning failed
    planned = dict(line.split(": ", 1) for line in plan(cfg))
    assert planned["predecessor"].endswith(
        "(its interrupted fine-tuning on the task continues from step 8 of 12), 4 layers"
    )
    with FileLock(cached.parent / f".{cached.name}.lock"):  # as a job of the sweep holds it while it fine-tunes
        planned = dict(line.split(": ", 1) for line in plan(cfg))
    assert f"(another job is fine-tuning it on the task now, at step 8 of 12 when last saved; this run waits, then " \
           f"loads it: {cached}), 4 layers" in planned["predecessor"]  # fmt: skip
    trained = StepsTrained()
    with monkeypatch.context() as patched:
        patched.setattr(resumable_training, "progress_bars", lambda settings: [trained])
        resumed = fine_tuned("resumed", work_folder(cached))
    assert trained.steps == [8, 9, 10, 11]  # the rest, not the whole fine-tuning again
    whole = fine_tuned("whole", tmp_path / "work")
    made, once = (json.loads((folder / "predecessor.json").read_text()) for folder in (resumed, whole))
    assert made["resumed_at_step"] == 8 and "resumed_at_step" not in once
    assert made["dev_metrics"] == once["dev_metrics"]
    weights = [AutoModelForSequenceClassification.from_pretrained(folder).state_dict() for folder in (resumed, whole)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[1])
    assert not work_folder(cached).exists() and not (tmp_path / "work").exists()  # gone once written
    assert not [str(w.message) for w in recwarn if "is not empty" in str(w.message)]


def test_a_fine_tuning_that_diverged_leaves_nothing_to_continue(tiny_base, glue_dir, tmp_path):
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "finetune.lr=1e12")
    datamodule = instantiate(cfg.data, tokenizer=cfg.model.base)
    with pytest.raises(RuntimeError, match="diverged"):
        fine_tune(cfg.model.base, datamodule, OmegaConf.to_container(cfg.finetune), tmp_path / "predecessor",
                  evaluation_settings(cfg.trainer, "32-true"), tmp_path / "work", every_n_steps=2)  # fmt: skip
    assert not (tmp_path / "work").exists()  # a resume would diverge again


def test_a_run_without_resume_checkpoints_fine_tunes_its_predecessor_without_them(base_overrides, tmp_path,
                                                                                   monkeypatch):  # fmt: skip
    """``~callbacks.resume_checkpoint`` (a node whose disk is small): no ``last.ckpt`` for the predecessor either."""
    monkeypatch.setattr(
        resumable_training, "progress_bars", lambda settings: [RaiseAtStep(8)]
    )  # after epoch 1's validation
    for dropped, kept in ((["~callbacks.resume_checkpoint"], 0), ([], 1)):
        with pytest.raises(RuntimeError, match="planned failure at step 8"):
            run(compose_config(*base_overrides, "finetune.epochs=2", *dropped))
        assert len(list((tmp_path / "cache" / "predecessors").glob(".work-*/last.ckpt"))) == kept
        assert len(list((tmp_path / "cache" / "predecessors").glob(".work-*"))) == kept  # none left without it


def test_a_checkpoint_from_other_library_versions_is_not_continued(tmp_path):
    """Lightning or transformers of another version may not restore what an earlier one saved: start over."""
    work = tmp_path / ".work-RTE-0123456789abcdef"
    work.mkdir()
    torch.save({"global_step": 3}, work / "last.ckpt")
    assert interrupted_at(work) is None  # written by a version that recorded none
    (work / WORK_VERSIONS).write_text(json.dumps(library_versions()))
    assert interrupted_at(work) == 3
    (work / WORK_VERSIONS).write_text(json.dumps(library_versions() | {"lightning": "2.5.0"}))
    assert interrupted_at(work) is None


def test_check_reports_a_work_folder_it_will_not_continue_once(tiny_base, glue_dir, tmp_path, caplog):
    """The plan's predecessor line and its projected time both ask where the fine-tuning would continue from: the
    warning came twice."""
    cfg = compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "trainer.precision=32-true",
                         "check_steps=1")  # fmt: skip
    cached = cached_predecessor_folder(cfg.model.base, instantiate(cfg.data, tokenizer=cfg.model.base),
                                       OmegaConf.to_container(cfg.finetune), cfg.seed, Path(cfg.paths.cache_dir),
                                       "32-true")  # fmt: skip
    work = work_folder(cached)
    work.mkdir(parents=True)
    torch.save({"global_step": 3}, work / "last.ckpt")
    other = library_versions() | {"lightning": "2.5.0"}
    (work / WORK_VERSIONS).write_text(json.dumps(other))
    with caplog.at_level(logging.WARNING, logger=resumable_training.__name__):
        planned = dict(line.split(": ", 1) for line in plan(cfg))
    assert "(fine-tuned on the task first, 6 steps, into the cache:" in planned["predecessor"]
    assert "time of the predecessor's fine-tuning" in planned
    warned = f"{work / 'last.ckpt'} was written by other library versions ({other}); the training starts over."
    assert [record.getMessage() for record in caplog.records].count(warned) == 1
