"""Deployment: ONNX and int8 models of the successor, checked against PyTorch, scored, timed and reported."""

import json
import logging
import math
import shutil
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
import torch
from app_runs import compose_config, setting_problems, tiny_run_overrides
from conftest import tiny_inputs, tiny_model
from huggingface_hub import ModelCard
from omegaconf import OmegaConf
from results_records import V1_RESULTS, V2_LANGUAGE_MODEL, a_run, plant, plant_new_kind
from transformers import BertModel

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.kinds.task_model.shipping import deploy_model
from theseus_pl.app.results.deployment_block import deployment_dict, read_deployment
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, run
from theseus_pl.core.precision import CPU_BF16_FLAGS, Cpu, this_cpu
from theseus_pl.core.settings import SettingsError
from theseus_pl.core.timing import p50_milliseconds
from theseus_pl.deploy import main
from theseus_pl.deployment import onnx_deployment, onnx_export
from theseus_pl.deployment import stage as deploy_module
from theseus_pl.deployment.gguf_types import GGUF_TYPES
from theseus_pl.deployment.onnx_export import (
    DeploymentError,
    export_onnx,
    fuse_for_ort,
    inference_session,
    int8_reduce_range,
    quantisable_attention,
    quantization_words,
    quantize_int8,
    session_logits,
)
from theseus_pl.deployment.record import DeploySettings
from theseus_pl.deployment.targets import pick_target

QUICK = DeploySettings(batch_sizes=(1, 2), repeats=1, sequence_length=12)
MODELS = ["pytorch_predecessor", "pytorch_successor", "pytorch_bf16", "onnx_fp32", "onnx_int8"]


# Attention fuses where it is scaled dot-product attention; MPNet and DeBERTa-v2 add a relative position bias to it.
FUSED_ATTENTION = {"bert", "roberta", "electra", "distilbert"}


@pytest.mark.parametrize("fused", [False, True], ids=["exported", "fused"])
def test_every_supported_family_exports_with_dynamic_axes_and_matches_pytorch(family, fused, tmp_path, tiny_onnx):
    model, example, path = tiny_onnx(family, tmp_path)
    if fused:
        operators = fuse_for_ort(path, example, tolerance=1e-5)
        assert operators["SkipLayerNormalization"] >= 4 and operators["BiasGelu"] == 2
        assert operators.get("Attention", 0) == (2 if family in FUSED_ATTENTION else 0)
    session = inference_session(path, threads=1)
    for batch_size, length in [(3, 10), (1, 4)]:  # neither the example's batch size nor its length
        inputs = tiny_inputs(batch_size, length)
        with torch.inference_mode():
            expected = model(**inputs).logits
        assert (session_logits(session, inputs) - expected).abs().max() <= 1e-4


def test_int8_makes_the_fused_attention_qattention_and_keeps_the_padding_mask(family, tmp_path, tiny_onnx):
    model, example, path = tiny_onnx(family, tmp_path)
    unfused = shutil.copyfile(path, tmp_path / "unfused.onnx")  # what the deployment quantises
    fuse_for_ort(path, example, tolerance=1e-5)
    fused = family in FUSED_ATTENTION
    rewritten = quantisable_attention(path, tmp_path / "attention.onnx", example, tolerance=1e-5)
    assert (rewritten is not None) == fused
    if fused:
        inputs = tiny_inputs(3, 10)  # the last row padded: the mask now reaches the attention as mask_index
        with torch.inference_mode():
            expected = model(**inputs).logits
        assert (session_logits(inference_session(rewritten, 1), inputs) - expected).abs().max() <= 1e-4
        assert quantisable_attention(path, tmp_path / "refused.onnx", example, tolerance=-1.0) is None
    words = quantize_int8(unfused, tmp_path / "int8.onnx", True, example, tolerance=1e-5, fused=path)
    operators = {node.op_type for node in onnx.load(tmp_path / "int8.onnx").graph.node}
    assert ("QAttention" in operators) == ("QAttention" in words) == fused


def test_a_graph_the_fused_one_differs_from_is_kept_unfused(tmp_path, tiny_onnx):
    _, example, path = tiny_onnx("bert", tmp_path)
    exported = path.read_bytes()
    assert fuse_for_ort(path, example, tolerance=-1.0) == {}  # no difference is within a negative tolerance
    assert path.read_bytes() == exported


def test_a_model_the_exporter_cannot_trace_gets_an_error_naming_its_family(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("Unsupported operator aten::made_up")

    monkeypatch.setattr(torch.onnx, "export", refuse)
    with pytest.raises(DeploymentError, match=r"could not export this mpnet model .*aten::made_up.*successor is kept"):
        export_onnx(tiny_model("mpnet"), tiny_inputs(2, 6), tmp_path / "model.onnx")


def planted_cpu(monkeypatch, bf16: bool) -> Cpu:
    """This CPU as the deployment stage sees it, with or without bf16 instructions (AVX-512 BF16), the rest as is."""
    real = this_cpu()
    cpu = Cpu(real.model, real.flags | {"avx512_bf16"} if bf16 else real.flags - CPU_BF16_FLAGS)
    monkeypatch.setattr(deploy_module, "this_cpu", lambda: cpu)
    return cpu


def saved_classifier(folder: Path, tokenizer, layers: int = 2, seed: int = 0) -> Path:
    tiny_model("bert", seed=seed, num_hidden_layers=layers, num_labels=2).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_checkpoint_folder_is_deployed_scored_and_timed_on_its_task(tmp_path, tiny_tokenizer, glue_dir, monkeypatch):
    cpu = planted_cpu(monkeypatch, bf16=True)  # the bf16 copy is deployed beside the others
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    predecessor = saved_classifier(tmp_path / "predecessor", tiny_tokenizer, layers=4, seed=1)
    # A hub checkpoint's own files where the deployment writes (they were deleted with the folders), and an earlier
    # deployment's int8 model, which goes
    theirs = [successor / "onnx" / "model_O4.onnx", successor / "openvino" / "openvino_model_qint8_quantized.xml"]
    for path in [*theirs, successor / "openvino" / "model_int8.bin"]:
        path.parent.mkdir(exist_ok=True)
        path.write_text("earlier")
    block = deploy_model(successor, QUICK, task="RTE", glue_dir=str(glue_dir), predecessor_dir=predecessor)
    assert [path.read_text() for path in theirs] == ["earlier", "earlier"]
    assert not (successor / "openvino" / "model_int8.bin").exists()  # QUICK asks no OpenVINO

    assert (successor / block.onnx).is_file() and (successor / block.onnx_int8).is_file()
    assert block.max_abs_diff <= block.tolerance == 1e-4
    assert block.checked_on == "10 dev rows"
    scores = block.dev_score
    assert set(scores) == {"pytorch_successor", "pytorch_bf16", "onnx_fp32", "onnx_int8"}
    assert scores["onnx_fp32"] == scores["pytorch_successor"] and 0 <= scores["onnx_int8"] <= 100
    assert list(block.latency_ms) == ["batch_1", "batch_2"]
    assert all(list(times) == MODELS and min(times.values()) > 0 for times in block.latency_ms.values())
    assert all(list(ratios) == MODELS[1:] for ratios in block.speedup_over_predecessor.values())
    sizes = block.size_mb
    assert list(sizes) == MODELS and sizes["onnx_int8"] < sizes["onnx_fp32"]
    assert block.smaller_than_predecessor["pytorch_successor"] == pytest.approx(
        sizes["pytorch_predecessor"] / sizes["pytorch_successor"]
    )
    assert block.settings.threads == torch.get_num_threads()
    assert (block.cpu, block.cpu_flags) == (cpu.model, cpu.relevant_flags)
    assert block.quantization == quantization_words(int8_reduce_range(cpu.flags), attention=True)  # a BERT
    assert block.fusions["Attention"] == 2 and block.fusions["SkipLayerNormalization"] >= 4
    assert block.target == pick_target("auto", block.latency_ms, block.dev_score, 0.5).target
    assert block.target_reason.startswith("the fastest with its dev score within 0.5 points")
    assert read_deployment(successor / "onnx" / "deployment.json") == block
    assert json.loads((successor / "onnx" / "deployment.json").read_text()) == deployment_dict(block)


def test_without_dev_data_the_model_is_checked_on_example_sentences(tmp_path, tiny_tokenizer, monkeypatch):
    planted_cpu(monkeypatch, bf16=True)
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    block = deploy_model(successor, DeploySettings(quantize=None, batch_sizes=(1,), repeats=1))
    assert block.checked_on == "4 example sentences (no dev data given)"
    assert block.dev_score is None and block.onnx_int8 is None
    assert not (successor / "onnx" / "model_int8.onnx").exists()
    assert list(block.latency_ms["batch_1"]) == ["pytorch_successor", "pytorch_bf16", "onnx_fp32"]
    assert block.speedup_over_predecessor == {"batch_1": None} and block.smaller_than_predecessor is None
    assert block.target in ("pytorch_successor", "onnx_fp32")  # bf16 was not checked against PyTorch's logits


def test_the_command_prints_its_json_block_alone_whatever_a_library_prints_while_it_deploys(
    tmp_path, tiny_tokenizer, capsys, monkeypatch
):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)

    def chatty_deploy(*args, **kwargs):  # as transformers' import prints its W&B notice under WANDB_MODE=offline
        print("[INFO] Running in WANDB offline mode")
        return deploy_model(*args, **kwargs)

    # as the command finds it
    monkeypatch.setattr("theseus_pl.app.kinds.task_model.shipping.deploy_model", chatty_deploy)
    block = main([str(successor), "--quantize", "none", "--no-openvino", "--batch-sizes", "1", "--repeats", "1",
                  "--no-own-lengths"])  # fmt: skip
    printed = capsys.readouterr()
    assert json.loads(printed.out) == deployment_dict(block)  # `| jq` reads it
    assert "Running in WANDB offline mode" in printed.err


def test_a_number_that_is_not_finite_prints_as_null_as_results_json_holds_it(tmp_path, capsys, monkeypatch):
    """The command printed ``json.dumps``' NaN and Infinity (a NaN dev score, a diverged LM's inf perplexity),
    which ``| jq`` and every strict JSON reader refuse, where ``results.json`` holds null."""
    block = replace(read_run(V1_RESULTS, TaskModelResults).deployment, dev_score={"onnx_int8": math.nan})
    rows = [{"type": "q8_0", "file": "gguf/model.q8_0.gguf", "perplexity": math.inf}]
    monkeypatch.setattr("theseus_pl.app.kinds.task_model.shipping.deploy_model", lambda *args: block)
    monkeypatch.setattr("theseus_pl.app.kinds.language_model.shipping.deploy_language_model_run", lambda *args: rows)
    (tmp_path / "model").mkdir()

    def strictly(constant: str) -> None:
        raise AssertionError(f"{constant} printed: not JSON")

    assert main([str(tmp_path / "model")]) == block
    assert json.loads(capsys.readouterr().out, parse_constant=strictly)["dev_score"] == {"onnx_int8": None}
    assert main([str(tmp_path / "model"), "--gguf", "q8_0"]) == rows
    assert json.loads(capsys.readouterr().out, parse_constant=strictly)[0]["perplexity"] is None


def test_a_cpu_without_bf16_instructions_times_no_bf16_copy_unless_the_target_names_it(
    tmp_path, tiny_tokenizer, monkeypatch
):
    planted_cpu(monkeypatch, bf16=False)
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    block = deploy_model(successor, DeploySettings(quantize=None, batch_sizes=(1,), repeats=1))
    assert list(block.latency_ms["batch_1"]) == ["pytorch_successor", "onnx_fp32"]
    named = deploy_model(successor, DeploySettings(quantize=None, batch_sizes=(1,), repeats=1, target="pytorch_bf16"))
    assert list(named.latency_ms["batch_1"]) == ["pytorch_successor", "pytorch_bf16", "onnx_fp32"]
    assert named.target == "pytorch_bf16"


def test_onnx_logits_off_by_more_than_the_tolerance_are_refused_and_the_files_removed(
    tmp_path, tiny_tokenizer, monkeypatch
):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    monkeypatch.setattr(deploy_module, "session_logits", lambda session, batch: session_logits(session, batch) + 1e-3)
    with pytest.raises(DeploymentError, match=r"beyond the tolerance 0\.0001: onnx_fp32 by up to 1\.00e-03;"):
        deploy_model(successor, QUICK)
    assert not (successor / "onnx").exists() and (successor / "model.safetensors").is_file()


def test_onnx_logits_that_are_not_numbers_are_refused_not_recorded_as_exact(tmp_path, tiny_tokenizer, monkeypatch):
    """max(0.0, nan) is 0.0: NaN logits passed the check, the export shipped, its record said within 0.0 of PyTorch."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    nan = float("nan")
    monkeypatch.setattr(deploy_module, "session_logits", lambda session, batch: session_logits(session, batch) * nan)
    with pytest.raises(DeploymentError, match=r"beyond the tolerance 0\.0001: onnx_fp32 by up to nan;"):
        deploy_model(successor, QUICK)
    assert not (successor / "onnx").exists() and (successor / "model.safetensors").is_file()


def test_a_successor_whose_weights_are_not_finite_is_refused_before_its_export(tmp_path, tiny_tokenizer):
    """A diverged run's NaN weights reached ONNX Runtime's int8 quantiser, which failed with a bare AssertionError."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    model = tiny_model("bert", num_hidden_layers=2, num_labels=2)
    with torch.no_grad():
        model.classifier.weight[0, 0] = float("nan")
    model.save_pretrained(successor)
    with pytest.raises(DeploymentError, match=r"not all finite: 1 of its \d+ parameters .*\(classifier\.weight\)"):
        deploy_model(successor, QUICK)
    assert not (successor / "onnx").exists() and (successor / "model.safetensors").is_file()


def test_a_deployment_stopped_after_its_export_leaves_none_of_its_files(tmp_path, tiny_tokenizer, monkeypatch, capsys):
    """Ctrl-C in the minutes of timing (or the quantiser, or NNCF's calibration, failing) left the exported files,
    unchecked or untimed, with no record of them: publish uploaded them under a card that said nothing of them."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(onnx_deployment, "timed_latency", interrupted)
    with pytest.raises(KeyboardInterrupt):
        deploy_model(successor, QUICK)
    assert not (successor / "onnx").exists() and (successor / "model.safetensors").is_file()
    # the command says so in one line, with the shell's status for Ctrl-C (it printed the traceback)
    with pytest.raises(SystemExit) as stopped:
        main([str(successor), "--quantize", "none", "--no-openvino", "--batch-sizes", "1", "--repeats", "1",
              "--sequence-length", "12"])  # fmt: skip
    assert stopped.value.code == 130 and not (successor / "onnx").exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"Interrupted: the deployment of {successor} removed what it had written. Rerun the command to deploy it."
    )


def test_check_says_what_the_runs_deploy_stage_would_make_and_ship(tiny_base, glue_dir, tmp_path):
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "check_steps=0"]
    lines = plan(compose_config(*overrides, "deploy.onnx=true", "deploy.quantize=int8"))
    assert (
        "deployment: ONNX Runtime fp32 and int8; OpenVINO fp32 and static int8 (NNCF, 300 training rows); timed at "
        "batch sizes 1, 32; ships the fastest within 0.5 points of the fp32 successor"  # OpenVINO by default: [dev]
    ) in lines
    named = plan(compose_config(*overrides, "deploy.onnx=true", "deploy.openvino=false", "deploy.target=onnx_fp32"))
    assert "deployment: ONNX Runtime fp32; no OpenVINO; timed at batch sizes 1, 32; ships onnx_fp32" in named
    assert not any(line.startswith("deployment:") for line in plan(compose_config(*overrides)))  # none asked for


def test_a_run_deploys_as_its_last_stage_and_the_command_redoes_it_on_the_folder(
    tiny_base, glue_dir, tmp_path, capsys, monkeypatch, caplog
):
    planted_cpu(monkeypatch, bf16=True)  # the bf16 copy deployed too, whatever this CPU
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    deploy_overrides = ["deploy.onnx=true", "deploy.quantize=int8", "deploy.openvino=false", "deploy.batch_sizes=[1,2]",
                        "deploy.repeats=1"]  # fmt: skip
    cfg = compose_config(*overrides, *deploy_overrides)
    results = run(cfg)
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as the app's Hydra writes it
    block = results.deployment
    assert results.failed_steps == {}
    assert block.checked_on == "10 dev rows" and set(block.dev_score) == set(MODELS[1:])
    assert block.dev_score["pytorch_successor"] == pytest.approx(results.successor.score, abs=1e-4)
    assert list(block.latency_ms["batch_2"]) == MODELS
    assert list(block.latency_ms) == ["batch_1", "batch_2", "batch_1_own_lengths", "batch_2_own_lengths"]
    assert block.seconds > 0
    assert (run_dir / "successor" / "onnx" / "model_int8.onnx").is_file()
    assert json.loads((run_dir / "results.json").read_text())["deployment"] == deployment_dict(block)
    summary = results.summary()
    assert summary["final/deploy/onnx_int8_score"] == block.dev_score["onnx_int8"]
    assert summary["final/deploy/onnx_int8_speedup_batch_1"] == block.speedup_over_predecessor["batch_1"]["onnx_int8"]
    card = ModelCard.load(run_dir / "successor" / "README.md").text
    assert "## Deployment" in card and "| ONNX int8 (`onnx/model_int8.onnx`) |" in card
    assert "| p50 ms, batch 2 (own lengths) |" in card and "in the (own lengths) columns the dev rows" in card

    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    assert main([str(run_dir), "--quantize", "none", "--dry-run"]) is None  # changes nothing
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before
    printed = capsys.readouterr().out
    assert "on the run's RTE dev set" in printed and str(run_dir / "results.json") in printed
    redone = main([str(run_dir), "--quantize", "none", "--no-openvino", "--batch-sizes", "1", "--repeats", "1",
                   "--no-own-lengths"])  # fmt: skip
    written = read_run(run_dir / "results.json", TaskModelResults)
    assert written.deployment == redone and written.successor == results.successor
    assert redone.onnx_int8 is None and list(redone.latency_ms) == ["batch_1"]
    assert redone.dev_score["onnx_fp32"] == block.dev_score["onnx_fp32"]  # the run's own dev set again
    assert "| ONNX int8" not in ModelCard.load(run_dir / "successor" / "README.md").text
    assert not (run_dir / "successor" / "onnx" / "model_int8.onnx").exists()  # no file the block does not describe

    def failing_export(*_):
        raise RuntimeError("the exporter broke")

    monkeypatch.setattr(onnx_deployment, "export_onnx", failing_export)  # after the earlier files were cleared
    quick = ["--quantize", "none", "--no-openvino", "--batch-sizes", "1", "--repeats", "1", "--no-own-lengths"]
    with pytest.raises(SystemExit, match="the exporter broke"):
        main([str(run_dir), *quick])
    failed = read_run(
        run_dir / "results.json", TaskModelResults
    )  # it still described the deleted ONNX files, and publish sent them
    assert failed.deployment is None and failed.failed_steps == {"deployment": "RuntimeError: the exporter broke"}
    assert "## Deployment" not in ModelCard.load(run_dir / "successor" / "README.md").text
    monkeypatch.undo()
    assert main([str(run_dir), *quick]) == read_run(run_dir / "results.json", TaskModelResults).deployment
    assert read_run(run_dir / "results.json", TaskModelResults).failed_steps == {}

    # Its predecessor gone (the cache cleaned, the run copied elsewhere): deployed alone, as the warning says (the
    # folder was still handed on and refused as no checkpoint, exit 2, after the warning said it would go on)
    record = json.loads((run_dir / "results.json").read_text())
    record["predecessor"]["dir"] = str(tmp_path / "gone")
    (run_dir / "results.json").write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING):
        alone = main([str(run_dir), *quick])
    assert alone.speedup_over_predecessor == {"batch_1": None} and alone.smaller_than_predecessor is None
    assert f"The run's predecessor ({tmp_path / 'gone'}) is gone: no ratios over it." in caplog.messages


def test_own_length_batches_are_single_rows_unpadded_or_length_sorted_batches_each_padded_to_its_longest(
    tiny_tokenizer,
):
    lengths = [5, 2, 9, 3, 7, 4, 8, 6, 2, 5]
    rows = [{"input_ids": [5] * n, "attention_mask": [1] * n} for n in lengths]
    singles = deploy_module.own_length_batches(rows, tiny_tokenizer, 1)
    assert [batch["input_ids"].shape for batch in singles] == [(1, n) for n in lengths]  # no padding at all
    pairs = deploy_module.own_length_batches(rows, tiny_tokenizer, 2)
    assert [batch["input_ids"].shape for batch in pairs] == [(2, 2), (2, 4), (2, 5), (2, 7), (2, 9)]
    assert sum(int(batch["attention_mask"].sum()) for batch in pairs) == sum(lengths)  # every row once, masked right


def test_a_run_without_deploy_settings_exports_no_onnx(tiny_base, glue_dir, tmp_path):
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path)))
    assert results.deployment is None and not (tmp_path / "run" / "successor" / "onnx").exists()
    assert "## Deployment" not in ModelCard.load(tmp_path / "run" / "successor" / "README.md").text


DRY_RUN = pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["deploy", "dry run"])


@DRY_RUN
def test_a_folder_with_no_successor_or_no_config_is_refused(tmp_path, tiny_tokenizer, dry_run):
    plant(tmp_path / "run", a_run())
    with pytest.raises(SystemExit, match=r"has no successor/ folder: it is not a finished theseus_pl run"):
        main([str(tmp_path / "run"), *dry_run])
    saved_classifier(tmp_path / "run" / "successor", tiny_tokenizer)
    with pytest.raises(
        SystemExit, match=r"has no .hydra/config.yaml, so its dev set is unknown: deploy its successor/"
    ):
        main([str(tmp_path / "run"), *dry_run])


def test_a_run_without_its_config_deploys_its_successor_with_task_as_its_refusal_says(
    tmp_path, tiny_tokenizer, glue_dir, caplog
):
    """The run's folder was refused for its missing config ("deploy its successor/ with --task"), its successor so
    deployed for being a run's ("deploy the run's folder"), and the run's folder with --task for its record naming
    the task: no command deployed it."""
    run_dir = tmp_path / "run"
    successor = saved_classifier(run_dir / "successor", tiny_tokenizer)
    plant(run_dir, a_run())
    record = (run_dir / "results.json").read_bytes()
    with pytest.raises(SystemExit, match=r"has no .hydra/config.yaml, so its dev set is unknown: deploy its succ"):
        main([str(run_dir)])
    with pytest.raises(SystemExit) as refused:
        main([str(run_dir), "--task", "RTE"])
    assert str(refused.value) == (
        f"--task: for a checkpoint folder; {run_dir} is a run's, without its record (.hydra/config.yaml): deploy its "
        f"successor with them (python -m theseus_pl.deploy {successor} --task RTE)."
    )
    quick = ["--quantize", "none", "--no-openvino", "--batch-sizes", "1", "--repeats", "1", "--no-own-lengths"]
    with_task = [str(successor), "--task", "RTE", "--glue-dir", str(glue_dir), *quick]
    with caplog.at_level(logging.WARNING):
        assert main([*with_task, "--dry-run"]) is None
        block = main(with_task)
    assert block.checked_on == "10 dev rows" and read_deployment(successor / "onnx" / "deployment.json") == block
    assert (run_dir / "results.json").read_bytes() == record  # the run's record and card are not this deployment's
    warning = (
        f"{successor} is the successor of the run in {run_dir}, which has no .hydra/config.yaml: it deploys as a "
        f"checkpoint, its block written to {successor / 'onnx' / 'deployment.json'}; the run's results.json and "
        "model card are left as they are."
    )
    assert caplog.messages.count(warning) == 2  # the dry run's, and the deployment's


def test_a_decoder_lm_run_without_its_config_is_told_how_it_ships_not_to_deploy_its_successor_with_task(tmp_path):
    """Its config was looked for first, so it was told a classifier's fix ("deploy its successor/ with --task"); a
    decoder LM never deploys to ONNX, config or none: its refusal says how it ships (--gguf)."""
    run_dir = tmp_path / "run"
    (run_dir / "successor").mkdir(parents=True)
    shutil.copy(V2_LANGUAGE_MODEL, run_dir / "results.json")
    with pytest.raises(SystemExit) as refused:
        main([str(run_dir)])
    assert str(refused.value).startswith(f"{run_dir} is a decoder-LM run: its successor is the causal-LM folder")
    assert str(refused.value).endswith("--gguf f16 q8_0.") and "--task" not in str(refused.value)


@DRY_RUN
def test_a_run_of_a_kind_deploy_does_not_serve_is_refused_in_one_line(tmp_path, monkeypatch, dry_run):
    run_dir = tmp_path / "run"
    plant_new_kind(run_dir, monkeypatch)
    (run_dir / "successor").mkdir()
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text("{}\n")
    with pytest.raises(SystemExit) as refused:
        main([str(run_dir), *dry_run])
    assert str(refused.value) == (
        f"{run_dir} is a run of kind 'sentence_embedding': ONNX and int8 deployment are built for encoder runs."
    )


@DRY_RUN
def test_a_folder_that_is_not_a_sequence_classifier_is_refused(tmp_path, tiny_tokenizer, dry_run):
    with pytest.raises(SystemExit, match=r"holds no config.json: it is not a Hugging Face checkpoint folder"):
        main([str(tmp_path), *dry_run])
    BertModel(tiny_model("bert").config).save_pretrained(tmp_path / "encoder")
    with pytest.raises(SystemExit, match=r"not a sequence-classification checkpoint \(its architectures: BertModel\)"):
        main([str(tmp_path / "encoder"), *dry_run])


@DRY_RUN
def test_dev_rows_that_cannot_be_read_are_refused_in_one_line_before_any_export(tmp_path, tiny_tokenizer, dry_run):
    """A missing dev file was a FileNotFoundError's traceback, and the dry run passed it."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    (tmp_path / "glue").mkdir()
    with pytest.raises(SystemExit, match=rf"^Missing {tmp_path / 'glue' / 'RTE' / 'dev.tsv'}\. The classic GLUE"):
        main([str(successor), "--task", "RTE", "--glue-dir", str(tmp_path / "glue"), *dry_run])
    with pytest.raises(SystemExit, match=r"^Unknown task 'FOO'\. GLUE tasks: "):
        main([str(successor), "--task", "FOO", *dry_run])
    with pytest.raises(SystemExit) as refused:  # it said data.glue_dir=..., a key of a run's config
        main([str(successor), "--task", "RTE", "--glue-dir", str(tmp_path / "nope"), *dry_run])
    assert str(refused.value).startswith(f"--glue-dir {tmp_path / 'nope'} is not a folder. Expected the classic GLUE")
    assert not (successor / "onnx").exists()


@pytest.mark.parametrize("gguf", [[], ["--gguf", "f16"]], ids=["onnx", "gguf"])
def test_a_folder_that_is_not_there_is_named_with_every_bad_option_at_once(tmp_path, gguf, capsys):
    """It was named "holds no config.json" (or "has no results.json"), and only once the options were right."""
    with pytest.raises(SystemExit):
        main([str(tmp_path / "nowhere"), "--threads", "0", *gguf])
    assert capsys.readouterr().err.splitlines() == [
        f"error: {tmp_path / 'nowhere'} is not a folder: give a finished run's folder or a checkpoint's.",
        "--threads 0 must be at least 1 (without it: torch's number of threads).",
    ]


@DRY_RUN
def test_a_bad_option_is_named_by_its_flag_as_typed_not_by_its_setting(tmp_path, tiny_tokenizer, dry_run, capsys):
    """The command said "deploy.sequence_length=1 must be null or ...", a key of a run's config, where the flag
    takes 0 for each batch's longest row."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    capsys.readouterr()  # what saving it printed
    with pytest.raises(SystemExit):
        main([str(successor), "--sequence-length", "1", "--batch-sizes", "1", "0", *dry_run])
    assert capsys.readouterr().err.splitlines() == [
        "error: --sequence-length 1 must be 0 (each batch's longest row) or at least 2 tokens.",
        "--batch-sizes 1 0 must be batch sizes, each at least 1, e.g. 1 32.",
    ]
    with pytest.raises(SystemExit):
        main([str(successor), "--gguf", "f16", "f16", *dry_run])
    assert capsys.readouterr().err.splitlines() == [
        f"error: --gguf f16 f16 must be distinct GGUF types, e.g. f16 q8_0, from {', '.join(GGUF_TYPES)}."
    ]


def test_a_dry_run_prints_what_it_would_export_time_and_write_and_exports_nothing(
    tmp_path, tiny_tokenizer, glue_dir, capsys
):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    predecessor = saved_classifier(tmp_path / "predecessor", tiny_tokenizer, layers=4, seed=1)
    before = sorted(path.name for path in successor.iterdir())
    flags = ["--predecessor", str(predecessor), "--batch-sizes", "1", "8", "--threads", "2", "--dry-run"]
    assert main([str(successor), "--task", "RTE", "--glue-dir", str(glue_dir), *flags]) is None
    printed = capsys.readouterr().out
    assert sorted(path.name for path in successor.iterdir()) == before  # no onnx/
    assert f"{successor / 'onnx' / 'model.onnx'}, {successor / 'onnx' / 'model_int8.onnx'}" in printed
    assert "on the RTE dev set" in printed and f"beside the predecessor {predecessor}" in printed
    assert "batch sizes 1, 8 (128 tokens a row), 20 calls each, on 2 threads" in printed
    assert f"write the deployment block to {successor / 'onnx' / 'deployment.json'}" in printed
    assert "ship the target auto (the fastest within 0.5 points of the fp32 successor)" in printed


def test_a_dry_run_without_dev_rows_says_auto_picks_as_the_deployment_does(tmp_path, tiny_tokenizer, capsys):
    """It said "the fastest within 0.5 points" where the deployment, with no dev score, picks among the models checked
    against PyTorch's logits; --max-score-drop, which it then does not read, is refused."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    assert main([str(successor), "--dry-run"]) is None
    assert capsys.readouterr().out.splitlines()[-2] == (
        "ship the target auto (the fastest of the models checked against PyTorch's logits; no dev data to score the "
        "others by)"
    )
    with pytest.raises(SystemExit) as refused:
        main([str(successor), "--max-score-drop", "2", "--dry-run"])
    assert str(refused.value) == (
        "--max-score-drop: read where auto picks by dev score; without dev rows it picks among the models checked "
        "against PyTorch's logits. A checkpoint folder's come from --task: give --task too."
    )


@DRY_RUN
def test_a_predecessor_that_is_not_a_checkpoint_is_refused(tmp_path, tiny_tokenizer, dry_run):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    with pytest.raises(SystemExit, match=r"holds no config.json: it is not a Hugging Face checkpoint folder"):
        main([str(successor), "--predecessor", str(tmp_path / "nowhere"), *dry_run])
    assert not (successor / "onnx").exists()


def test_missing_onnxruntime_names_the_extra_before_a_run_starts(monkeypatch):
    real = onnx_export.importlib.util.find_spec
    monkeypatch.setattr(
        onnx_export.importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else real(name)
    )
    with pytest.raises(
        DeploymentError, match=r"needs onnxruntime \(not installed\): pip install 'theseus_pl\[deploy\]'"
    ):
        onnx_export.require_onnxruntime()
    problems = setting_problems(compose_config("deploy.onnx=true"))
    assert problems == ["deploy: Deployment needs onnxruntime (not installed): pip install 'theseus_pl[deploy]'."]
    assert setting_problems(compose_config()) == []  # not asked for, not needed


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("deploy.quantize=int4", "deploy.quantize='int4' must be null (fp32 only) or int8."),
        ("deploy.onnx=maybe", "deploy.onnx='maybe' must be true or false."),
        (
            "deploy.batch_sizes=[0]",
            "deploy.batch_sizes=[0] must be a list of batch sizes, each at least 1, e.g. [1,32].",
        ),
        ("deploy.repeats=0", "deploy.repeats=0 must be a whole number, at least 1."),
        (
            "deploy.target=int8",
            "deploy.target='int8' must be one of auto, pytorch_successor, pytorch_bf16, onnx_fp32, onnx_int8, "
            "openvino_fp32, openvino_bf16, openvino_int8.",
        ),
        ("deploy.max_score_drop=-1", "deploy.max_score_drop=-1 must be a number of dev points, at least 0, e.g. 0.5."),
        ("deploy.target=onnx_int8", "deploy.target=onnx_int8 needs the int8 model: set deploy.quantize=int8 too."),
    ],
)
def test_bad_deploy_settings_are_refused_before_a_run(override, message):
    assert setting_problems(compose_config(override)) == [message]


def test_bad_deploy_settings_are_refused_by_the_command():
    with pytest.raises(ValueError, match=r"deploy.quantize='int4' must be null \(fp32 only\) or int8"):
        DeploySettings(quantize="int4")
    with pytest.raises(SystemExit):  # argparse: invalid choice
        main(["somewhere", "--quantize", "int4"])


@DRY_RUN
def test_bad_deploy_options_are_refused_by_a_dry_run_too(tmp_path, tiny_tokenizer, dry_run):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    with pytest.raises(SystemExit) as refused:
        main([str(successor), "--quantize", "none", "--target", "onnx_int8", *dry_run])
    assert str(refused.value) == "--target onnx_int8 needs the int8 model: drop --quantize none."


def test_a_dry_run_names_the_missing_deploy_extra(tmp_path, tiny_tokenizer, monkeypatch):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    real = onnx_export.importlib.util.find_spec
    monkeypatch.setattr(
        onnx_export.importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else real(name)
    )
    with pytest.raises(SystemExit, match=r"needs onnxruntime \(not installed\): pip install 'theseus_pl\[deploy\]'"):
        main([str(successor), "--dry-run"])


def test_deploy_settings_name_every_problem_with_their_fields_at_once():
    with pytest.raises(SettingsError) as raised:
        DeploySettings(quantize="int4", batch_sizes=(1, 0), repeats="many", threads=0)
    assert raised.value.problems == {
        "quantize": "deploy.quantize='int4' must be null (fp32 only) or int8.",
        "batch_sizes": "deploy.batch_sizes=[1, 0] must be a list of batch sizes, each at least 1, e.g. [1,32].",
        "repeats": "deploy.repeats='many' must be a whole number, at least 1.",
        "threads": "deploy.threads=0 must be null or at least 1.",
    }
    with pytest.raises(SettingsError) as raised:
        DeploySettings.from_config({"onnx": "maybe", "sequence_length": 1, "batch_sizes": [1, 32]})
    assert list(raised.value.problems) == ["onnx", "sequence_length"]
    settings = DeploySettings.from_config({"onnx": True, "quantize": None, "batch_sizes": [2]})
    assert settings == DeploySettings(quantize=None, batch_sizes=(2,))


def test_a_batch_timed_on_a_busy_machine_records_no_speed_up_and_says_why(tmp_path, tiny_tokenizer, monkeypatch):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    predecessor = saved_classifier(tmp_path / "predecessor", tiny_tokenizer, layers=4, seed=1)

    readings = iter([0.0, 1.6])  # other processes' cores while batch 1, then batch 2, were timed

    def busy_at_batch_2(calls, repeats):
        times, _ = p50_milliseconds(calls, repeats)
        return times, next(readings)

    monkeypatch.setattr(onnx_deployment, "p50_milliseconds", busy_at_batch_2)
    settings = DeploySettings(quantize=None, batch_sizes=(1, 2), repeats=1)
    block = deploy_model(successor, settings, predecessor_dir=predecessor)
    assert block.busy_cores == {"batch_2": 1.6} and block.speedup_over_predecessor["batch_2"] is None
    assert block.speedup_over_predecessor["batch_1"]["pytorch_successor"] > 0 and "batch_2" in block.latency_ms
    assert read_deployment(successor / "onnx" / "deployment.json") == block


def test_p50_is_the_median_of_interleaved_calls():
    calls = []
    times, other_cores = p50_milliseconds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 3, 1)
    assert calls == ["a", "b"] * 4 and set(times) == {"a", "b"} and min(times.values()) >= 0
    assert other_cores is None  # the machine's load is not read in tests (conftest)
    with pytest.raises(ValueError, match="repeats=0 must be at least 1"):
        p50_milliseconds({"a": lambda: None}, repeats=0)


def test_int8_weights_keep_8_bits_on_a_cpu_with_vnni_and_7_without():
    assert int8_reduce_range(frozenset({"avx2", "avx512f"})) is True
    assert int8_reduce_range(frozenset({"avx2", "avx512f", "avx512_vnni"})) is False
    assert int8_reduce_range(frozenset({"avx2", "avx_vnni"})) is False
    assert int8_reduce_range(frozenset({"amx_int8"})) is False
    assert "7 bits" in quantization_words(True) and "8 bits" in quantization_words(False)
