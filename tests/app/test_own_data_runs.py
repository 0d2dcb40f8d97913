"""Your own classifier on your own files, as a practitioner first tries it: named for the data, never for a GLUE
task; everything wrong said at once, before training, without a traceback or a run folder left behind."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from app_runs import compose_config
from command_runs import run_command
from conftest import OWN_LABELS, tiny_model

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.run.pipeline import run

# Lightning's and the libraries' notices that a user can do nothing about: the console must not show them.
NOTICES = ("weights_only", "anonymous setting", "LeafSpec", "litlogger", "GPU available", "Composed config")


def own_data_overrides(folder: Path, *extra: str) -> list[str]:
    """The own-data command of docs/guide/own-model.md, on the tiny classifier, with a budget of seconds."""
    return [
        f"model.predecessor={folder / 'my-classifier'}",
        f"data.files={{train: {folder / 'train.csv'}, validation: {folder / 'dev.csv'}}}",
        "data.text_columns=[text]", f"data.labels=[{','.join(OWN_LABELS)}]", "theseus.successor_layers=2",
        "trainer=cpu", "trainer.max_steps=6", "schedule_steps=3", "trainer.val_check_interval=2",
        "data.batch_size=8", "optimizer.lr=1e-3", "benchmark.repeats=1", *extra,
    ]  # fmt: skip


def app(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    """``python -m theseus_pl <arguments>`` in ``folder``, W&B offline, the caches in the test's folder."""
    environment = {**os.environ, "WANDB_MODE": "offline", "THESEUS_PL_CACHE": str(folder.parent / "cache")}
    return run_command([sys.executable, "-m", "theseus_pl", *arguments], cwd=folder, env=environment, timeout=900)


def console_lines(completed: subprocess.CompletedProcess) -> list[str]:
    """What the console showed, progress bars left out (they redraw one line; piped, each redraw is a line)."""
    text = (completed.stdout + completed.stderr).replace("\r", "\n")
    return [line for line in text.splitlines() if line.strip() and not re.search(r"it/s|\d+/\d+ \[|━|\x1b\[", line)]


@pytest.mark.slow
def test_the_own_data_command_names_the_run_after_the_data_and_prints_each_line_once(own_data):
    completed = app(own_data, *own_data_overrides(own_data))
    assert completed.returncode == 0, completed.stderr[-3000:]
    (folder,) = (own_data / "outputs" / "reviews").iterdir()  # named for the files' folder, not for RTE
    assert not (own_data / "outputs" / "RTE").exists()
    results = json.loads((folder / "results.json").read_text())
    assert results["task"] == "reviews" and results["data"]["labels"] == OWN_LABELS
    card = (folder / "successor" / "README.md").read_text()
    assert "\n# reviews: a 2-layer successor" in card and "RTE" not in card
    config = json.loads((folder / "successor" / "config.json").read_text())
    assert list(config["id2label"].values()) == OWN_LABELS  # as the library example exports them
    lines = console_lines(completed)
    (headline,) = [line for line in lines if "predecessor" in line and "successor" in line and "retained" in line]
    assert "reviews: predecessor" in headline
    messages = [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in lines]
    assert len(messages) == len(set(messages)), "a line printed twice"
    for notice in NOTICES:
        assert notice not in completed.stdout + completed.stderr, notice


@pytest.mark.slow
def test_every_mistake_is_refused_in_one_message_with_status_2_and_no_run_folder(own_data, tmp_path, tiny_tokenizer):
    other_head = tmp_path / "rotten-fresh"
    labels = {0: "rotten", 1: "fresh"}
    tiny_model("bert", num_labels=2, id2label=labels, label2id={v: k for k, v in labels.items()}).save_pretrained(
        other_head
    )
    tiny_tokenizer.save_pretrained(other_head)
    completed = app(own_data, *own_data_overrides(
        own_data, f"model.predecessor={other_head}", "data.text_columns=[review]", "theseus.successor_layers=8",
        "replacement.b=high", "theseus.init=botom", "trainer=gpu",
    ))  # fmt: skip
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert completed.stdout == "" and "Traceback" not in completed.stderr
    problems = completed.stderr.splitlines()
    assert problems[0] == "The run cannot start (nothing was trained or logged):"
    expected = [
        "- theseus.init='botom' must be one of",
        "- replacement.b='high' must be a number.",
        "- trainer.accelerator=gpu (trainer=gpu, trainer=ddp) needs a CUDA GPU",
        "- theseus.successor_layers=8 must be between 1 and the predecessor's 4 layers.",
        f"- model.predecessor: {other_head} does not fit reviews: its head's labels are ['rotten', 'fresh']",
        f"- data: {own_data / 'train.csv'} has no column 'review'",
        f"- data: {own_data / 'dev.csv'} has no column 'review'",
    ]
    assert len(problems) == 1 + len(expected)
    for start in expected:
        assert any(line.startswith(start) for line in problems), start
    assert not (own_data / "outputs").exists()


@pytest.mark.slow
def test_a_mistyped_config_option_gets_the_nearest_names(tmp_path):
    completed = app(tmp_path, "+experiment=dmeo", "method=kd,theseuss")
    assert completed.returncode == 2
    assert completed.stderr.splitlines()[1:] == [
        "- experiment=dmeo: there is no experiment named 'dmeo'; did you mean demo?",
        "- method=theseuss: there is no method named 'theseuss'; did you mean theseus or theseus_kd or lm_theseus?",
    ]
    assert not list(tmp_path.iterdir())


def refusal(overrides: list[str]) -> list[str]:
    with pytest.raises(RunRefused) as raised:
        run(compose_config(*overrides))
    return raised.value.problems


def test_data_that_cannot_be_read_as_given_is_refused(own_data, tmp_path, tiny_tokenizer):
    base = [*own_data_overrides(own_data), f"paths.output_dir={tmp_path / 'run'}", f"paths.cache_dir={tmp_path}"]
    (problem,) = refusal([*base, "data.task=SST-2"])
    assert problem.startswith("data.task=SST-2 is a GLUE task, with GLUE's columns and labels, but data.text_columns,")
    assert "to read data.files as SST-2, drop data.text_columns, data.labels" in problem
    (problem,) = refusal([*base, "data.labels=[negative,positive,negative]"])
    repeated = "data.labels=['negative', 'positive', 'negative'] lists negative more than once: one value per class."
    assert problem == repeated
    other_files = [override for override in base if not override.startswith("data.files=")]  # a dict would merge
    (problem,) = refusal([*other_files, f"data.files={{train: {own_data / 'train.csv'}}}"])
    assert problem == "data.files has no 'validation' file; it names train."
    missing = f"data.files={{train: {own_data / 'train.csv'}, validation: {own_data / 'x.csv'}}}"
    (problem,) = refusal([*other_files, missing])
    assert problem == f"data.files.validation={own_data / 'x.csv'} does not exist."
    (problem,) = refusal([*base, "data.labels=[positive,negative]"])
    assert problem.endswith("the data's labels ['positive', 'negative']: list them in the head's order "
                            "(data.labels=['negative', 'positive']).")  # fmt: skip
    bare = tmp_path / "bare"
    tiny_model("bert").base_model.save_pretrained(bare)  # a BertModel: no classifier head at all
    tiny_tokenizer.save_pretrained(bare)
    (problem,) = refusal([*base, f"model.predecessor={bare}"])
    assert problem == (
        f"model.predecessor: {bare} is a BertModel, not a fine-tuned sequence classifier (config.json, "
        f"architectures). To fine-tune it into the predecessor first, give it as model.base={bare}."
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    (problem,) = refusal([*base, f"model.predecessor={empty}"])
    assert problem.startswith(
        f"model.predecessor={str(empty)!r} (model and tokenizer): {empty} holds no config.json and no weights "
    )
    assert not (tmp_path / "run").exists()


def test_a_run_without_data_says_how_to_name_some(tmp_path):
    (problem,) = refusal(["model=minilm", f"paths.output_dir={tmp_path / 'run'}"])
    assert problem.startswith("data: No data named: give data.task=GLUE_TASK (e.g. RTE), your own files")


def test_an_interrupted_run_is_not_resumed_onto_files_edited_since(own_data, tmp_path):
    """Its first steps trained on the old rows, and its record would name the new ones."""
    overrides = [*own_data_overrides(own_data), "logger=csv", f"paths.output_dir={tmp_path / 'run'}",
                 f"paths.cache_dir={tmp_path / 'cache'}"]  # fmt: skip
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *killed))
    train = own_data / "train.csv"
    kept = train.read_text()
    train.write_text(kept + "a good cat,positive\n")
    with pytest.raises(RunRefused, match=r"\(step 4\) was trained on other data than this command's the user's own"):
        run(compose_config(*overrides))
    train.write_text(kept)
    assert run(compose_config(*overrides)).resumed_from is not None  # the files as they were: resumed
