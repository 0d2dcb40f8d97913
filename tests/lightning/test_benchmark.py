"""The core benchmark runs end to end in a tiny setting, so it cannot rot (no timing asserts)."""

import importlib.util
import json
import multiprocessing
from pathlib import Path

import pytest
import torch
from conftest import tiny_model
from glue_files import make_glue_dir

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "core_step.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("core_step", SCRIPT)
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    return benchmark


def test_core_benchmark_reports_every_figure(tmp_path, tiny_tokenizer, monkeypatch):
    """Each measurement in a process of its own as the benchmark takes them (its peak memory its own), forked from
    this one instead of started afresh: Python, torch and Lightning are loaded already (two minutes of starts saved
    on 2 cores). The next test starts them as the benchmark does."""
    model_dir = tmp_path / "model"
    tiny_model(num_labels=2).save_pretrained(model_dir)  # 4 layers
    tiny_tokenizer.save_pretrained(model_dir)
    output = tmp_path / "core.json"
    benchmark = load_benchmark()

    def measure(argv, writer):
        torch.set_num_threads(1)  # a forked child's OpenMP threads can hang (the parent's pool is not copied)
        writer.send(json.dumps(benchmark.measure(benchmark.parse_args(argv))))

    def in_a_forked_process(args, task, **overrides):
        fork = multiprocessing.get_context("fork")
        reader, writer = fork.Pipe(duplex=False)
        child = fork.Process(target=measure, args=(benchmark.child_argv(args, task, **overrides), writer))
        child.start()
        child.join()
        assert child.exitcode == 0, f"the measurement {task} failed"
        return json.loads(reader.recv())

    monkeypatch.setattr(benchmark, "run_child", in_a_forked_process)
    report = benchmark.main(
        ["--model", str(model_dir), "--successor-layers", "2", "--batch-size", "2", "--seq-len", "8", "--steps", "1",
         "--glue-dir", str(make_glue_dir(tmp_path / "glue")), "--scale", "--scale-seq-lens", "8",
         "--output", str(output)]
    )  # fmt: skip
    assert json.loads(output.read_text()) == json.loads(json.dumps(report))

    training = report["training"]
    assert list(training) == [
        "finetune",
        "finetune_successor",
        *(f"{m}_p{p}" for m in ("theseus", "reference") for p in (0.1, 0.5, 1.0)),
        "hf_trainer",
    ]
    for config, row in training.items():
        for key in ("step_time_ratio", "peak_memory_ratio", "model_memory_ratio"):
            assert row[key] == 1.0 if config == "finetune" else row[key] > 0, (config, key)
    assert training["theseus_p1.0"]["mean_replaced_modules"] == training["reference_p1.0"]["mean_replaced_modules"] == 2
    # Half the layers, forward and backward: fewer operations than fine-tuning all four, none of them zero.
    assert 0 < training["theseus_p1.0"]["flops_per_step"] < training["finetune"]["flops_per_step"]
    # The truncated model: half the layers of fine-tuning's (more than Theseus's step, which trains no embeddings).
    assert 0 < training["finetune_successor"]["flops_per_step"] < training["finetune"]["flops_per_step"]
    assert training["hf_trainer"]["examples_per_second"] > 0 and "adamw" in training["hf_trainer"]["optimizer"]
    assert report["matmul_flops_per_second"] > 0
    assert report["loop_overhead"]["lightning_step_seconds"] > 0 and report["loop_overhead"]["bare_step_seconds"] > 0
    assert set(report["throughput"]) == {"padded_to_max_length", "dynamic", "dynamic_grouped"}
    assert all(row["examples_per_second"] > 0 for row in report["throughput"].values())
    assert all(report["inference"][f"batch_{b}"]["speedup"] > 0 for b in (1, 2))
    assert list(report["scale"]["seq_len"]) == ["8"]
    assert list(report["scale"]["successor_layers"]) == ["1", "2"]  # every n that divides the 4 layers, below 4
    assert all(
        set(rows) == {"finetune", "theseus_p0.5", "theseus_p1.0"} for rows in report["scale"]["seq_len"].values()
    )


def test_a_part_of_the_benchmark_measures_only_that_part_and_fine_tuning_is_always_its_base(tmp_path, tiny_tokenizer):
    model_dir = tmp_path / "model"
    tiny_model(num_labels=2).save_pretrained(model_dir)
    tiny_tokenizer.save_pretrained(model_dir)
    report = load_benchmark().main(
        ["--model", str(model_dir), "--successor-layers", "2", "--batch-size", "2", "--seq-len", "8", "--steps", "1",
         "--configs", "theseus_p1.0", "--parts", "training", "--output", str(tmp_path / "core.json")]
    )  # fmt: skip
    assert set(report) == {"settings", "training"}  # no matmul, loop, throughput or inference figure
    assert list(report["training"]) == ["finetune", "theseus_p1.0"]
