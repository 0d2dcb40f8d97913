"""OpenVINO targets: the successor converted from its ONNX graph, fp32 checked against PyTorch, int8 calibrated by NNCF
on training rows, scored, timed and shipped like the ONNX models."""

import importlib.util
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from app_runs import compose_config, setting_problems
from conftest import tiny_inputs
from test_deploy import DRY_RUN, QUICK, saved_classifier

from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.kinds.task_model import card as task_model_card
from theseus_pl.app.kinds.task_model.shipping import deploy_model
from theseus_pl.app.results.deployment_block import deployment_dict, read_deployment
from theseus_pl.app.ship import deployment_table
from theseus_pl.data.datamodule import TextTaskDataModule
from theseus_pl.deploy import main
from theseus_pl.deployment import onnx_deployment, openvino_export
from theseus_pl.deployment import stage as deploy_module
from theseus_pl.deployment.onnx_export import DeploymentError
from theseus_pl.deployment.openvino_export import compile_openvino, convert_openvino, openvino_logits
from theseus_pl.deployment.record import DeploySettings
from theseus_pl.deployment.targets import TARGETS

OPENVINO = replace(QUICK, openvino=True, calibration_rows=6)


def test_openvino_fp32_matches_pytorch_on_every_family_at_any_batch_and_length(family, tmp_path, tiny_onnx):
    model, _, onnx = tiny_onnx(family, tmp_path)
    compiled = compile_openvino(convert_openvino(onnx, tmp_path / "model.xml"), threads=1, precision="f32")
    for batch_size, length in [(3, 10), (1, 4)]:  # neither the example's batch size nor its length
        inputs = tiny_inputs(batch_size, length)
        with torch.inference_mode():
            expected = model(**inputs).logits
        assert (openvino_logits(compiled, inputs) - expected).abs().max() <= onnx_deployment.TOLERANCE


def test_a_checkpoint_deploys_to_openvino_fp32_and_calibrated_int8_scored_timed_and_recorded(
    tmp_path, tiny_tokenizer, glue_dir
):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    predecessor = saved_classifier(tmp_path / "predecessor", tiny_tokenizer, layers=4, seed=1)
    block = deploy_model(successor, OPENVINO, task="RTE", glue_dir=str(glue_dir), predecessor_dir=predecessor)

    assert (block.openvino, block.openvino_int8) == ("openvino/model.xml", "openvino/model_int8.xml")
    for graph in (block.openvino, block.openvino_int8):
        assert (successor / graph).is_file() and (successor / graph).with_suffix(".bin").is_file()
    assert block.calibration == "static int8 by NNCF (transformer preset), calibrated on 6 training rows"
    assert block.max_abs_diff <= block.tolerance
    scores = block.dev_score
    assert scores["openvino_fp32"] == scores["pytorch_successor"] and 0 <= scores["openvino_int8"] <= 100
    for times in block.latency_ms.values():
        assert {"openvino_fp32", "openvino_int8"} <= set(times) and min(times.values()) > 0
    assert block.size_mb["openvino_int8"] < block.size_mb["openvino_fp32"]
    assert {"openvino", "nncf"} <= set(block.versions)
    assert read_deployment(successor / "onnx" / "deployment.json") == block


def test_calibration_draws_training_rows_only_each_unpadded_the_same_draw_every_time(
    tmp_path, tiny_tokenizer, glue_dir
):
    folder = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    datamodule = TextTaskDataModule("RTE", str(folder), glue_dir=str(glue_dir))
    datamodule.setup("validate")  # as a deployment sets it up: dev rows only, until calibration reads training rows
    assert "train" not in datamodule.splits
    drawn = deploy_module.calibration_rows(datamodule, datamodule.tokenizer, count=5)
    train = {tuple(row["input_ids"]) for row in datamodule.splits["train"]}
    assert len(drawn) == 5 and all(batch["input_ids"].shape[0] == 1 for batch in drawn)
    assert all(bool(batch["attention_mask"].all()) for batch in drawn)  # each row at its own length: no padding
    assert {tuple(batch["input_ids"][0].tolist()) for batch in drawn} <= train
    again = deploy_module.calibration_rows(datamodule, datamodule.tokenizer, count=5)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(drawn, again, strict=True))


def test_without_training_rows_openvino_ships_fp32_only_and_says_why(tmp_path, tiny_tokenizer, caplog):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    block = deploy_model(successor, replace(OPENVINO, batch_sizes=(1,)))
    assert block.openvino == "openvino/model.xml" and block.openvino_int8 is None and block.calibration is None
    assert "No training rows to calibrate OpenVINO's int8 model on" in caplog.text
    assert "openvino_fp32" in block.latency_ms["batch_1"] and "openvino_int8" not in block.latency_ms["batch_1"]


def test_openvino_logits_off_by_more_than_the_tolerance_are_refused_and_every_export_removed(
    tmp_path, tiny_tokenizer, monkeypatch
):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    monkeypatch.setattr(deploy_module, "openvino_logits", lambda model, batch: openvino_logits(model, batch) + 1e-3)
    with pytest.raises(DeploymentError, match=r"openvino_fp32 by up to 1\.00e-03"):
        deploy_model(successor, replace(OPENVINO, quantize=None))
    assert not (successor / "openvino").exists() and not (successor / "onnx").exists()
    assert (successor / "model.safetensors").is_file()


def test_an_openvino_target_is_shipped_and_its_card_runs_it_with_openvino(tmp_path, tiny_tokenizer, glue_dir):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    block = deploy_model(successor, replace(OPENVINO, target="openvino_int8"), task="RTE", glue_dir=str(glue_dir))
    assert (block.target, block.target_reason) == ("openvino_int8", "deploy.target=openvino_int8 as set")
    pair_task = SimpleNamespace(data=SimpleNamespace(text_columns=("sentence1", "sentence2")))  # what it reads
    text = task_model_card._how_to_run(block, pair_task, repo_id=None)
    assert 'compile_model(\n    "<this folder>/openvino/model_int8.xml", "CPU"' in text
    assert 'tokenizer("A first sentence.", "A second sentence.", return_tensors="np")' in text
    assert "onnxruntime" not in text
    # the card's code runs the model it names to ship: it ran the int8 file where fp32 was chosen over it
    for target, file in [("onnx_fp32", "model.onnx"), ("onnx_int8", "model_int8.onnx")]:
        text = task_model_card._how_to_run(replace(block, target=target), pair_task, repo_id=None)
        assert f'onnxruntime.InferenceSession("<this folder>/onnx/{file}")' in text
    assert task_model_card._how_to_run(replace(block, target="pytorch_successor"), pair_task, repo_id=None) == (
        "The PyTorch successor is the model to ship here: load it as above.\n"
    )


def test_auto_deploys_openvino_where_its_extra_is_installed_and_auto_may_pick_it(monkeypatch):
    assert checked_settings(compose_config("deploy.onnx=true")).deploy.openvino is True  # the run's default: auto
    assert DeploySettings(openvino="auto").openvino is True
    assert DeploySettings(openvino="auto", target="onnx_int8").openvino is False  # no OpenVINO model can be shipped
    assert DeploySettings(openvino="auto", target="openvino_fp32").openvino is True
    assert DeploySettings(openvino=False).openvino is False
    assert DeploySettings().openvino is False  # a record written before the key existed deployed none
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "openvino" else real(name))
    assert DeploySettings(openvino="auto").openvino is False  # deployed without it (the pick says so: test_targets)


def test_missing_openvino_names_its_extra_before_a_run_and_in_a_dry_run(tmp_path, tiny_tokenizer, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "nncf" else real(name))
    message = "deploy.openvino needs nncf (not installed): pip install 'theseus_pl[openvino]'."
    with pytest.raises(DeploymentError, match=r"needs nncf \(not installed\)"):
        openvino_export.require_openvino()
    assert setting_problems(compose_config("deploy.openvino=true")) == [f"deploy: {message}"]
    assert setting_problems(compose_config("deploy.onnx=true")) == []  # auto: deployed without it
    assert setting_problems(compose_config("deploy.onnx=true", "deploy.target=openvino_fp32")) == [f"deploy: {message}"]
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    with pytest.raises(SystemExit, match=r"pip install 'theseus_pl\[openvino\]'"):
        main([str(successor), "--openvino", "--dry-run"])


@DRY_RUN
def test_an_openvino_target_without_its_model_is_refused_before_anything_is_exported(tmp_path, tiny_tokenizer, dry_run):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    with pytest.raises(SystemExit) as refused:  # it said "set deploy.openvino=true ... too", a run's config's words
        main([str(successor), "--no-openvino", "--quantize", "none", "--target", "openvino_int8", *dry_run])
    assert str(refused.value) == (
        "--target openvino_int8 needs the OpenVINO int8 model: drop --no-openvino and drop --quantize none."
    )
    assert not (successor / "onnx").exists()
    assert setting_problems(compose_config("deploy.target=openvino_fp32", "deploy.openvino=false")) == [
        "deploy.target=openvino_fp32 needs the OpenVINO model: set deploy.openvino=true too."
    ]
    assert setting_problems(compose_config("deploy.target=openvino_fp32")) == []  # auto deploys what it names


def test_the_command_prints_its_block_alone_on_stdout_while_nncf_calibrates(tmp_path, tiny_tokenizer, glue_dir, capsys):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    options = ["--openvino", "--calibration-rows", "4", "--batch-sizes", "1", "--repeats", "1"]
    block = main([str(successor), *options, "--task", "RTE", "--glue-dir", str(glue_dir)])
    assert block.openvino_int8 == "openvino/model_int8.xml"
    assert json.loads(capsys.readouterr().out) == deployment_dict(block)


def test_a_dry_run_lists_the_openvino_files_it_would_write(tmp_path, tiny_tokenizer, glue_dir, capsys):
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    main([str(successor), "--openvino", "--task", "RTE", "--glue-dir", str(glue_dir), "--dry-run"])
    out = capsys.readouterr().out
    assert f"{successor}/openvino/model.xml, {successor}/openvino/model_int8.xml" in out
    assert not (successor / "openvino").exists()


def test_a_dry_run_says_how_many_training_rows_int8_is_calibrated_on(tmp_path, tiny_tokenizer, glue_dir, capsys):
    """It said the 300 asked where the training split has 24: the deployment calibrates on the 24 (its record says)."""
    successor = saved_classifier(tmp_path / "successor", tiny_tokenizer)
    task = ["--openvino", "--task", "RTE", "--glue-dir", str(glue_dir), "--dry-run"]
    main([str(successor), *task])
    all_rows = "; OpenVINO's int8 calibrated on 24 training rows (a fixed draw, never dev rows; all there are, of the "
    assert all_rows + "300 asked)\n" in capsys.readouterr().out
    main([str(successor), *task, "--calibration-rows", "5"])
    assert "; OpenVINO's int8 calibrated on 5 training rows (a fixed draw, never dev rows)\n" in capsys.readouterr().out


def test_the_card_names_every_target():
    assert set(TARGETS) <= set(deployment_table.DEPLOYED_MODELS)


def test_bf16_is_compiled_from_the_fp32_ir_on_a_cpu_with_bf16_and_nothing_without_openvino_files(tmp_path):
    files = openvino_export.openvino_files(tmp_path, quantize="int8")
    bf16_cpu, avx2_cpu = frozenset({"avx2", "avx512_bf16"}), frozenset({"avx2"})
    assert openvino_export.compiled_targets(files, bf16_cpu) == {**files, "openvino_bf16": files["openvino_fp32"]}
    assert openvino_export.compiled_targets(files, avx2_cpu) == files
    assert openvino_export.compiled_targets({}, bf16_cpu) == {}  # deploy.openvino=false on a bf16 CPU
