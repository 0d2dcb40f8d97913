"""Deploy on a finished run asking what it does not build for the run's kind, or what this machine lacks: refused
before any export, in one line that says what it builds instead or what to install. No model is loaded: the refusals
come from the record and the options alone."""

import importlib.util
from pathlib import Path

import pytest
from conftest import tiny_model
from results_records import a_run, an_embedding_run, plant

from theseus_pl.app.kinds.task_model.shipping import deploy_run
from theseus_pl.app.results.envelope import RunRecord
from theseus_pl.deploy import main
from theseus_pl.deployment.onnx_export import DeploymentError
from theseus_pl.deployment.record import DeploySettings

pytestmark = pytest.mark.quick

DRY_RUN = pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["deploy", "dry run"])


def finished(folder: Path, record: RunRecord) -> Path:
    """A finished run's folder as deploy looks at it: its record, a successor/ folder and the run's config."""
    plant(folder, record)
    (folder / "successor").mkdir()
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "config.yaml").write_text("{}\n")
    return folder


def refusal(argv: list[str]) -> str:
    """The one line a refused deploy says (it exits with status 2)."""
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    (line,) = str(refused.value).splitlines()
    return line


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (["--openvino"], "deploy.openvino needs nncf (not installed): pip install 'theseus_pl[openvino]'."),
        (["--target", "pytorch_bf16"], "deploy.target=pytorch_bf16: a sentence-embedding run deploys "
                                       "pytorch_successor, onnx_fp32, onnx_int8, openvino_fp32, openvino_bf16, "
                                       "openvino_int8 (or auto)."),
    ],
    ids=["openvino missing", "bf16 target"],
)  # fmt: skip
@DRY_RUN
def test_what_a_sentence_embedding_deployment_cannot_build_is_refused_before_any_model_loads(
    tmp_path, options, why, dry_run, monkeypatch
):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "nncf" else real(name, *rest))
    run_dir = finished(tmp_path / "run", an_embedding_run())  # its successor/ is empty: nothing could load
    assert refusal([str(run_dir), *options, *dry_run]) == why
    assert not (run_dir / "successor" / "onnx").exists()


@pytest.mark.parametrize(
    ("record", "kind", "instead"),
    [
        (a_run(), "task_model", "deploy it to ONNX without --gguf"),
        (an_embedding_run(), "embedding_model", "its successor is a sentence-transformers folder already"),
    ],
    ids=["task model", "sentence embedding"],
)
@DRY_RUN
def test_gguf_names_the_kind_of_a_run_that_is_no_decoder_lm(tmp_path, record, kind, instead, dry_run):
    run_dir = finished(tmp_path / "run", record)
    assert refusal([str(run_dir), "--gguf", "f16", *dry_run]) == (
        f"{run_dir} is a run of kind {kind!r}: --gguf writes decoder LMs (runs of kind 'language_model') only; "
        f"{instead}."
    )


@pytest.mark.parametrize("options", [[], ["--gguf", "f16", "q8_0"]], ids=["onnx", "gguf"])
@DRY_RUN
def test_a_runs_successor_deployed_as_a_bare_checkpoint_is_refused_naming_the_run(tmp_path, options, dry_run):
    """Its onnx/ was replaced while the run's results.json and card still named the old int8 file (publish sent it).
    The command it names keeps the deployment's options: --gguf's said only that the folder had no results.json."""
    run_dir = finished(tmp_path / "run", a_run())
    assert refusal([str(run_dir / "successor"), *options, *dry_run]) == (
        f"{run_dir / 'successor'} is the successor of the run in {run_dir}: deploy the run's folder (python -m "
        f"theseus_pl.deploy {' '.join([str(run_dir), *options])}), whose record and model card then describe the "
        "files written."
    )


@DRY_RUN
def test_gguf_on_the_successor_of_a_run_without_its_config_still_names_the_run(tmp_path, dry_run):
    """A checkpoint's ONNX deployment of such a successor goes ahead on --task's dev rows (tests/deployment); GGUF files
    are checked on the run's held-out text, which only the run's config names."""
    run_dir = finished(tmp_path / "run", a_run())
    (run_dir / ".hydra" / "config.yaml").unlink()
    assert refusal([str(run_dir / "successor"), "--gguf", "f16", *dry_run]) == (
        f"{run_dir / 'successor'} is the successor of the run in {run_dir}: deploy the run's folder (python -m "
        f"theseus_pl.deploy {run_dir} --gguf f16), whose record and model card then describe the files written."
    )


@DRY_RUN
def test_a_model_without_its_tokenizer_is_refused_before_anything_is_exported(tmp_path, dry_run):
    """transformers made up an empty-vocabulary tokenizer, every dev word became unknown, and the scores and timings
    of that were recorded, exit 0."""
    model = tmp_path / "model"
    tiny_model("bert", num_hidden_layers=2, num_labels=2).save_pretrained(model)  # and no tokenizer beside it
    assert refusal([str(model), *dry_run]).startswith(
        f"{model} holds no tokenizer (tokenizer.json, tokenizer_config.json or a vocabulary): its dev rows would be "
        "tokenised with an empty vocabulary"
    )
    assert not (model / "onnx").exists()


@DRY_RUN
def test_own_lengths_on_a_checkpoint_without_task_is_refused_naming_the_flag(tmp_path, tiny_tokenizer, dry_run):
    """Without --task a checkpoint has no dev rows to time at their own lengths: --own-lengths was taken, never read
    (--no-own-lengths asks for what is done)."""
    model = tmp_path / "model"
    tiny_model("bert", num_hidden_layers=2, num_labels=2).save_pretrained(model)
    tiny_tokenizer.save_pretrained(model)
    assert refusal([str(model), "--own-lengths", *dry_run]) == (
        "--own-lengths: read where there are dev rows to time at their own lengths; a checkpoint folder's come from "
        "--task: give --task too."
    )
    assert not (model / "onnx").exists()


@DRY_RUN
def test_a_model_whose_head_cannot_serve_the_task_is_refused_before_anything_is_exported(
    tmp_path, tiny_tokenizer, glue_dir, dry_run
):
    """A 2-label classifier deployed with --task STS-B (a regression) passed the dry run, exported, then failed on
    the shapes and left onnx/ behind; submit refused it up front."""
    model = tmp_path / "model"
    tiny_model("bert", num_hidden_layers=2, num_labels=2).save_pretrained(model)
    tiny_tokenizer.save_pretrained(model)
    assert refusal([str(model), "--task", "STS-B", "--glue-dir", str(glue_dir), *dry_run]) == (
        f"{model} does not fit --task STS-B: its head predicts 2 labels ['LABEL_0', 'LABEL_1'], the data STS-B has "
        "one score (a regression)."
    )
    # RTE's head fits QNLI's labels: the task its config names tells them apart
    tiny_model("bert", num_hidden_layers=2, num_labels=2, finetuning_task="RTE").save_pretrained(model)
    assert refusal([str(model), "--task", "QNLI", "--glue-dir", str(glue_dir), *dry_run]) == (
        f"{model} does not fit --task QNLI: it was fine-tuned on RTE, not QNLI (its config.json's finetuning_task; "
        "remove it if it is wrong)."
    )
    assert not (model / "onnx").exists()


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (["--gguf", "q8_0", "--openvino", "--target", "onnx_int8"],
         "--openvino, --target: for a deployment to ONNX or OpenVINO; --gguf writes a decoder LM's GGUF files and "
         "reads --llama-cpp, --repeats and --threads."),
        (["--task", "SST-2", "--predecessor", "elsewhere"],
         "--task, --predecessor: for a checkpoint folder; {run} is a run's, whose record names its task and "
         "predecessor."),
        (["--llama-cpp", "true"], "--llama-cpp: read with --gguf only (a decoder LM's GGUF files)."),
        (["--target", "onnx_int8", "--max-score-drop", "2"],
         "--max-score-drop: read by --target auto only (the fastest within that many dev points); --target onnx_int8 "
         "names the model shipped."),
    ],
    ids=["onnx options with gguf", "checkpoint options on a run", "llama.cpp without gguf", "score drop of a target"],
)  # fmt: skip
@DRY_RUN
def test_an_option_the_deployment_would_not_read_is_refused_not_dropped(tmp_path, options, why, dry_run):
    run_dir = finished(tmp_path / "run", a_run())
    assert refusal([str(run_dir), *options, *dry_run]) == why.format(run=run_dir)


@DRY_RUN
def test_a_record_holding_a_score_as_text_is_refused_before_anything_is_exported(tmp_path, dry_run):
    folder = finished(tmp_path / "run", a_run())
    results = folder / "results.json"
    results.write_text(results.read_text().replace('"score": 70.0', '"score": "70.0"'))
    line = refusal([str(folder), *dry_run])
    assert line.endswith(f"{results}: successor.score is '70.0' (text), not a number or null")


@DRY_RUN
def test_a_length_beyond_the_models_positions_or_a_folder_without_weights_is_refused_before_any_export(
    tmp_path, tiny_tokenizer, dry_run
):
    """--sequence-length 600 on a model of fewer positions passed the dry run, exported, then failed on the shapes;
    a folder copied without its weights file passed it too."""
    model = tmp_path / "model"
    tiny_model("bert", num_hidden_layers=2, num_labels=2, max_position_embeddings=64).save_pretrained(model)
    tiny_tokenizer.save_pretrained(model)
    assert refusal([str(model), "--sequence-length", "600", *dry_run]) == (
        f"--sequence-length 600 is more than {model} takes: 64 tokens; give at most 64."
    )
    (model / "model.safetensors").unlink()
    assert refusal([str(model), *dry_run]) == (
        f"{model} holds no weights (model.safetensors or pytorch_model.bin or successor.pt): copy them beside its "
        "config.json."
    )
    assert not (model / "onnx").exists()


@DRY_RUN
def test_a_killed_run_or_a_sweeps_folder_is_named_as_what_it_is(tmp_path, dry_run):
    """Each was "holds no config.json: it is not a Hugging Face checkpoint folder", which names neither."""
    killed = tmp_path / "killed"
    (killed / ".hydra").mkdir(parents=True)
    (killed / "checkpoints").mkdir()
    assert refusal([str(killed), *dry_run]) == (
        f"{killed} is the folder of a run that has not finished (no results.json and successor/): rerun its command, "
        "which resumes it, then give the folder again."
    )
    sweep = tmp_path / "multirun" / "2026-12-02_10-00-00"
    for job in ("0", "1"):
        (sweep / job / ".hydra").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("{}\n")
    assert refusal([str(sweep), "--gguf", "f16", *dry_run]) == (
        f"{sweep} is a sweep's folder, of many runs: give one run's folder, e.g. {sweep / '0'}."
    )


def test_the_task_models_deployment_called_on_another_kinds_run_names_the_command_that_deploys_it(tmp_path):
    """A library user calling the task model's deploy_run on a sentence-embedding run is sent to deploy, which
    deploys each kind with the deployer its kind registered."""
    run_dir = finished(tmp_path / "run", an_embedding_run())
    with pytest.raises(DeploymentError, match=f"^{run_dir} is a run of kind 'embedding_model'; deploy it with "
                                              f"python -m theseus_pl.deploy {run_dir}, which deploys"):  # fmt: skip
        deploy_run(run_dir, DeploySettings())
