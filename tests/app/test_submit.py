import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import tiny_model
from decoder_models import tiny_decoder
from glue_files import make_glue_dir
from results_records import a_run, plant

from theseus_pl.app.ship.submission import prediction_strings
from theseus_pl.data.tasks import glue_task
from theseus_pl.submit import main

pytestmark = pytest.mark.quick


def test_predictions_use_the_label_strings_of_the_tasks_files():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
    assert prediction_strings(glue_task("RTE"), logits) == ["entailment", "not_entailment"]
    assert prediction_strings(glue_task("CoLA"), logits) == ["0", "1"]
    assert prediction_strings(glue_task("MNLI"), torch.eye(3)) == ["entailment", "neutral", "contradiction"]
    assert prediction_strings(glue_task("STS-B"), torch.tensor([[-0.4], [2.345], [5.6]])) == ["0.000", "2.345", "5.000"]


@pytest.fixture
def model_dir(tmp_path, tiny_tokenizer):
    def save(num_labels):
        folder = tmp_path / f"model{num_labels}"
        tiny_model("bert", num_labels=num_labels).save_pretrained(folder)
        tiny_tokenizer.save_pretrained(folder)
        return str(folder)

    return save


def run(model, task, tmp_path, *more):
    glue_dir = tmp_path / "glue"
    if not glue_dir.is_dir():
        make_glue_dir(glue_dir)
    out = tmp_path / "submission"
    flags = ["--task", task, "--glue-dir", str(glue_dir), "--output", str(out), "--cache-dir", str(tmp_path / "c")]
    return main([model, *flags, *more])


def test_rte_submission_file_has_the_servers_format(model_dir, tmp_path):
    (path,) = run(model_dir(2), "RTE", tmp_path)
    assert path.name == "RTE.tsv"
    lines = path.read_text().splitlines()
    assert lines[0] == "index\tprediction"
    rows = [line.split("\t") for line in lines[1:]]
    assert [index for index, _ in rows] == ["0", "1", "2"]
    assert {prediction for _, prediction in rows} <= {"entailment", "not_entailment"}


def test_mnli_writes_matched_and_mismatched_files(model_dir, tmp_path):
    paths = run(model_dir(3), "MNLI", tmp_path)
    assert [path.name for path in paths] == ["MNLI-m.tsv", "MNLI-mm.tsv"]
    for path in paths:
        assert len(path.read_text().splitlines()) == 3


def refusal(model, task, tmp_path, capsys, *more) -> str:
    """The one-line refusal ``submit`` prints (exit status 2), nothing predicted or written."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        run(model, task, tmp_path, *more)
    assert refused.value.code == 2 and not (tmp_path / "submission").exists()
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    return line.removeprefix("error: ")


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_batch_size_below_one_is_refused_as_the_command_line_is_read(model_dir, tmp_path, capsys, dry_run):
    """It passed the dry run, and the real one refused it in torch's words once the test rows were tokenised."""
    with pytest.raises(SystemExit) as refused:
        run(model_dir(2), "RTE", tmp_path, *dry_run, "--batch-size", "0")
    assert refused.value.code == 2 and not (tmp_path / "submission").exists()
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("error: argument --batch-size: '0' is no batch size: a whole number, at least 1")
    )


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_model_for_another_task_is_refused(model_dir, tmp_path, capsys, dry_run):
    model = model_dir(3)
    assert refusal(model, "RTE", tmp_path, capsys, *dry_run) == (
        f"{model} does not fit RTE: its head predicts 3 labels ['LABEL_0', 'LABEL_1', 'LABEL_2'], the data RTE has 2: "
        "['entailment', 'not_entailment']."
    )
    classifier = model_dir(2)
    assert refusal(classifier, "STS-B", tmp_path, capsys, *dry_run) == (
        f"{classifier} does not fit STS-B: its head predicts 2 labels ['LABEL_0', 'LABEL_1'], the data STS-B has one "
        "score (a regression)."
    )


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_model_that_would_predict_from_a_random_head_is_refused(tmp_path, tiny_tokenizer, capsys, dry_run):
    causal = tmp_path / "causal"
    tiny_decoder("gpt2").save_pretrained(causal)
    tiny_tokenizer.save_pretrained(causal)
    assert refusal(str(causal), "SST-2", tmp_path, capsys, *dry_run, "--batch-size", "1") == (
        f"{causal} is a GPT2LMHeadModel, not a sequence classifier: a submission predicts SST-2's labels with a "
        "classification head fine-tuned on it."
    )
    headless = tmp_path / "headless"  # a bare encoder whose config claims a head it has no weights for
    tiny_model("bert", num_labels=2).bert.save_pretrained(headless)
    config = json.loads((headless / "config.json").read_text())
    (headless / "config.json").write_text(json.dumps(config | {"architectures": ["BertForSequenceClassification"]}))
    tiny_tokenizer.save_pretrained(headless)
    assert refusal(str(headless), "SST-2", tmp_path, capsys, *dry_run) == (
        f"{headless} lacks the weights of classifier.bias, classifier.weight: they would be random, and so would its "
        "predictions."
    )


def test_folders_that_hold_no_model_are_refused_in_one_line(model_dir, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    unfinished = tmp_path / "unfinished"
    (unfinished / ".hydra").mkdir(parents=True)
    (unfinished / "checkpoints").mkdir()
    without_tokenizer = tmp_path / "no_tokenizer"
    tiny_model("bert", num_labels=2).save_pretrained(without_tokenizer)
    assert refusal(str(tmp_path / "empty"), "RTE", tmp_path, capsys, "--dry-run") == (
        f"{tmp_path / 'empty'} holds no config.json: it is not a Hugging Face checkpoint folder."
    )
    assert refusal(str(unfinished), "RTE", tmp_path, capsys, "--dry-run") == (
        f"{unfinished} is the folder of a run that has not finished (no results.json and successor/): rerun its "
        "command, which resumes it, then give the folder again."
    )
    assert refusal(str(tmp_path / "nowhere"), "RTE", tmp_path, capsys, "--dry-run") == (
        f"{tmp_path / 'nowhere'}: no such folder."
    )
    assert refusal(str(without_tokenizer), "RTE", tmp_path, capsys, "--dry-run") == (
        f"{without_tokenizer} holds no tokenizer (tokenizer.json, tokenizer_config.json or a vocabulary): save the "
        "model's tokenizer beside it (tokenizer.save_pretrained(folder))."
    )


def test_a_finished_runs_folder_submits_its_successor(model_dir, tmp_path):
    run_folder = tmp_path / "run"
    shutil.copytree(model_dir(2), run_folder / "successor")
    plant(run_folder, a_run("RTE"))
    (path,) = run(str(run_folder), "RTE", tmp_path)
    assert len(path.read_text().splitlines()) == 4  # the header and the three test rows


def test_a_run_folder_is_refused_for_a_task_other_than_its_own(model_dir, tmp_path, capsys):
    run_folder = tmp_path / "run"  # RTE and QNLI share their labels: the head fits both
    shutil.copytree(model_dir(2), run_folder / "successor")
    plant(run_folder, a_run("RTE"))
    expected = f"{run_folder} is a run on RTE, not QNLI: submit it with --task RTE."
    assert refusal(str(run_folder), "QNLI", tmp_path, capsys) == expected


def test_a_runs_successor_given_alone_is_refused_for_a_task_other_than_its_runs(model_dir, tmp_path, capsys):
    """Its config.json made it a checkpoint like any other, checked by its head alone, which fits QNLI as RTE."""
    run_folder = tmp_path / "run"
    shutil.copytree(model_dir(2), run_folder / "successor")
    plant(run_folder, a_run("RTE"))
    successor = run_folder / "successor"
    expected = f"{successor} is the successor of a run on RTE, not QNLI: submit it with --task RTE."
    assert refusal(str(successor), "QNLI", tmp_path, capsys, "--dry-run") == expected
    assert [path.name for path in run(str(successor), "RTE", tmp_path, "--dry-run")] == ["RTE.tsv"]


def test_a_successor_copied_away_from_its_run_is_refused_for_another_task_by_its_config(model_dir, tmp_path, capsys):
    """Away from its run's record, a run's successor was checked by its head alone, which fits QNLI as RTE: its
    config.json names the task it was trained on (``finetuning_task``, as transformers' GLUE example writes it)."""
    copied = Path(model_dir(2))
    config = json.loads((copied / "config.json").read_text())
    (copied / "config.json").write_text(json.dumps({**config, "finetuning_task": "rte"}))
    assert refusal(str(copied), "QNLI", tmp_path, capsys, "--dry-run") == (
        f"{copied} does not fit QNLI: it was fine-tuned on RTE, not QNLI (its config.json's finetuning_task; remove it "
        "if it is wrong); submit it with --task RTE."
    )
    assert [path.name for path in run(str(copied), "RTE", tmp_path, "--dry-run")] == ["RTE.tsv"]


def test_a_run_on_own_data_is_refused_without_advising_a_task_that_is_refused_too(model_dir, tmp_path, capsys):
    run_folder = tmp_path / "run"  # it advised "--task reviews", which --task then refused: no GLUE task has that name
    shutil.copytree(model_dir(2), run_folder / "successor")
    plant(run_folder, a_run("reviews"))
    assert refusal(str(run_folder), "RTE", tmp_path, capsys) == (
        f"{run_folder} is a run on your own data (reviews), not a GLUE task: the GLUE server scores only models "
        "trained on a GLUE task's training set; deploy it instead (python -m theseus_pl.deploy)."
    )


def test_a_dry_run_lists_the_files_it_would_write_and_predicts_nothing(model_dir, tmp_path, capsys):
    paths = run(model_dir(3), "MNLI", tmp_path, "--dry-run")
    assert paths == [tmp_path / "submission" / "MNLI-m.tsv", tmp_path / "submission" / "MNLI-mm.tsv"]
    assert not (tmp_path / "submission").exists() and not (tmp_path / "c").exists()
    printed = capsys.readouterr().out
    assert all(str(path) in printed for path in paths)
    assert str(tmp_path / "glue" / "MNLI" / "test_matched.tsv") in printed


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_an_output_that_is_a_file_is_refused_before_anything_is_predicted(model_dir, tmp_path, dry_run):
    """The dry run listed the files it would write into it; submit predicted every test row and then failed with
    ``[Errno 17] File exists``."""
    (tmp_path / "submission").write_text("my notes")
    with pytest.raises(SystemExit, match=r"^--output .*/submission is a file: give a folder for the \.tsv files"):
        run(model_dir(2), "RTE", tmp_path, *dry_run)
    assert (tmp_path / "submission").read_text() == "my notes"


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_missing_test_file_is_refused(model_dir, tmp_path, dry_run):
    (make_glue_dir(tmp_path / "glue") / "RTE" / "test.tsv").unlink()
    with pytest.raises(SystemExit, match=r"Missing .*RTE/test\.tsv"):
        run(model_dir(2), "RTE", tmp_path, *dry_run)
    assert not (tmp_path / "submission").exists()


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_glue_dir_that_is_not_a_folder_is_refused_naming_the_flag(model_dir, tmp_path, capsys, dry_run):
    """It said "data.glue_dir=... is not a folder", a key of a run's config, for the --glue-dir typed."""
    nowhere = tmp_path / "nope"
    with pytest.raises(SystemExit):
        main([model_dir(2), "--task", "RTE", "--glue-dir", str(nowhere), "--output", str(tmp_path / "out"), *dry_run])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: --glue-dir {nowhere} is not a folder. Expected the classic GLUE layout: "
        f"{nowhere}/RTE/{{train,dev,test}}.tsv"
    )
