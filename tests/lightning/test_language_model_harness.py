"""lm-evaluation-harness on a causal LM: a local GLUE task scored offline as a hand computation says, and the checks
that refuse what cannot be scored before any compute."""

import sys

import pytest
import torch
from decoder_models import tiny_decoder, tiny_lm_tokenizer
from glue_files import write_tsv

from theseus_pl.data.harness_tasks import LOCAL_TASKS, local_task_folder
from theseus_pl.lightning.language_model_harness import harness_problems, harness_scores

pytestmark = pytest.mark.quick

ROWS = [["the economy", "1"], ["jobs", "0"], ["the nation is new", "1"], ["not the work", "0"], ["school", "1"]]


def _sst2_folder(tmp_path):
    write_tsv(tmp_path / "glue" / "SST-2" / "dev.tsv", [["sentence", "label"], *ROWS])
    return local_task_folder(tmp_path / "glue", ["sst2_local"], tmp_path / "cache")


def _answer_tokenizer():
    tokenizer = tiny_lm_tokenizer()
    tokenizer.add_tokens(["negative", "positive"])  # the answer words, ids within the tiny decoder's vocabulary
    return tokenizer


def _hand_accuracy(model, tokenizer) -> float:
    """The share of rows whose label's answer word the model finds likelier right after the task's prompt."""
    task, correct = LOCAL_TASKS["sst2_local"], 0
    for sentence, label in ROWS:
        context = tokenizer(task.prompt.replace("{{sentence}}", sentence))["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([context])).logits[0, -1].log_softmax(-1)
        scores = [logits[tokenizer.convert_tokens_to_ids(choice)] for choice in task.choices]
        correct += int(max(range(2), key=lambda i: scores[i]) == int(label))
    return correct / len(ROWS)


def test_a_local_task_scores_the_answer_the_model_finds_likelier_offline(tmp_path):
    tokenizer, folder = _answer_tokenizer(), _sst2_folder(tmp_path)
    for seed in (0, 1, 2):  # random models: their answers differ from row to row
        model = tiny_decoder("llama", seed=seed).eval()
        scores = harness_scores(model, tokenizer, ["sst2_local"], [folder], batch_size=2)
        assert scores["sst2_local"]["acc"] == pytest.approx(_hand_accuracy(model, tokenizer))
        assert scores["sst2_local"]["acc_stderr"] > 0
    assert harness_scores(model, tokenizer, ["sst2_local"], [folder], limit=2)["sst2_local"]["acc"] in (0, 0.5, 1)


def test_the_local_task_folder_is_written_once_with_absolute_paths(tmp_path):
    folder = _sst2_folder(tmp_path)
    definition = (folder / "sst2_local.yaml").read_text()
    assert f"validation: {folder}/sst2_local_validation.jsonl" in definition and "train" not in definition
    stamp = (folder / "sst2_local.yaml").stat().st_mtime_ns
    assert _sst2_folder(tmp_path) == folder and (folder / "sst2_local.yaml").stat().st_mtime_ns == stamp
    with pytest.raises(FileNotFoundError, match=r"RTE/dev.tsv"):
        local_task_folder(tmp_path / "glue", ["rte_local"], tmp_path / "cache")


def test_unknown_tasks_and_tasks_without_their_data_are_named_with_the_fix(tmp_path):
    folder = _sst2_folder(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "quiz.yaml").write_text(
        "task: quiz\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    validation: {tmp_path / 'absent.jsonl'}\noutput_type: multiple_choice\nvalidation_split: validation\n"
        "doc_to_text: '{{q}}'\ndoc_to_target: 0\ndoc_to_choice: [a, b]\nmetadata:\n  version: 1.0\n"
    )
    problems = harness_problems(["sst2_local", "sst2_locl", "quiz"], [folder, tmp_path / "mine"])
    assert problems[0].startswith("evaluation.lm_eval.tasks: lm-eval has no task 'sst2_locl' (did you mean sst2_local")
    assert problems[1].startswith("evaluation.lm_eval.tasks: quiz cannot load its data (")
    assert "evaluation.lm_eval.include_path=FOLDER" in problems[1] and len(problems) == 2


def test_without_lm_eval_installed_the_extra_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval.tasks", None)  # an import of it raises ImportError
    assert harness_problems(["sst2_local"], []) == [
        'evaluation.lm_eval.tasks needs lm-evaluation-harness, not installed here: pip install "theseus_pl[lm-eval]".'
    ]
