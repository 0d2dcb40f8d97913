import pytest
import torch
from conftest import tiny_model
from glue_files import make_glue_dir

from theseus_pl.app.ship.submission import prediction_strings
from theseus_pl.data.tasks import glue_task
from theseus_pl.submit import main


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


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_model_for_another_task_is_refused(model_dir, tmp_path, dry_run):
    with pytest.raises(ValueError, match="predicts 3 labels but RTE has 2"):
        run(model_dir(3), "RTE", tmp_path, *dry_run)


def test_a_dry_run_lists_the_files_it_would_write_and_predicts_nothing(model_dir, tmp_path, capsys):
    paths = run(model_dir(3), "MNLI", tmp_path, "--dry-run")
    assert paths == [tmp_path / "submission" / "MNLI-m.tsv", tmp_path / "submission" / "MNLI-mm.tsv"]
    assert not (tmp_path / "submission").exists() and not (tmp_path / "c").exists()
    printed = capsys.readouterr().out
    assert all(str(path) in printed for path in paths)
    assert str(tmp_path / "glue" / "MNLI" / "test_matched.tsv") in printed


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["submit", "dry run"])
def test_a_missing_test_file_is_refused(model_dir, tmp_path, dry_run):
    (make_glue_dir(tmp_path / "glue") / "RTE" / "test.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"Missing .*RTE/test\.tsv"):
        run(model_dir(2), "RTE", tmp_path, *dry_run)
    assert not (tmp_path / "submission").exists()
