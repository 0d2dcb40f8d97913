"""Whatever is wrong with a run is found before the Trainer starts, all of it, each problem naming file or option."""

import json

import lightning.pytorch as pl
import pytest
from app_runs import compose_config, tiny_run_overrides
from conftest import tiny_model
from glue_files import write_tsv

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.predecessors.classifier import check_fits_task
from theseus_pl.app.run.pipeline import refusal_problems, run
from theseus_pl.data.tasks import glue_task

pytestmark = pytest.mark.quick

HEADER = ["index", "sentence1", "sentence2", "label"]


@pytest.fixture
def no_training(monkeypatch):
    """Any Trainer.fit or validate fails the test: the checks must come first."""

    def started(*args, **kwargs):
        raise AssertionError("a Trainer started")

    monkeypatch.setattr(pl.Trainer, "fit", started)
    monkeypatch.setattr(pl.Trainer, "validate", started)


def refusal(overrides: list[str]) -> list[str]:
    with pytest.raises(RunRefused) as raised:
        run(compose_config(*overrides))
    return raised.value.problems


def test_bad_rows_in_every_split_are_reported_together_by_file_and_line(tiny_base, glue_dir, tmp_path, no_training):
    train, dev = glue_dir / "RTE" / "train.tsv", glue_dir / "RTE" / "dev.tsv"
    write_tsv(train, [HEADER, ["0", "the cat", "a dog", "entailment"], ["1", "the cat", "a dog", "maybe"]])
    dev.write_bytes("\t".join(HEADER).encode("utf-16"))
    problems = refusal(tiny_run_overrides(tiny_base, glue_dir, tmp_path))
    assert problems == [
        f"data: {train}, line 3: label 'maybe' is not one of the task's labels ['entailment', 'not_entailment'].",
        f"data: {dev} is not UTF-8 text (invalid start byte at byte 0, line 1). Save it as UTF-8; a file that starts "
        "with the bytes FF FE is UTF-16.",
    ]
    assert not (tmp_path / "run").exists()


def test_a_wrong_field_count_and_an_empty_split_are_refused(tiny_base, glue_dir, tmp_path, no_training):
    train, dev = glue_dir / "RTE" / "train.tsv", glue_dir / "RTE" / "dev.tsv"
    write_tsv(train, [HEADER, ["0", "the cat", "a dog", "entailment"], ["1", "the cat", "entailment"]])
    write_tsv(dev, [HEADER])
    problems = refusal(tiny_run_overrides(tiny_base, glue_dir, tmp_path))
    assert problems[0].startswith(f"data: {train}, line 3: 3 fields where the header has 4.")
    assert problems[1] == f"data: The validation split of RTE ({dev}) is empty."


def test_model_problems_come_together(tiny_base, tiny_tokenizer, glue_dir, tmp_path, no_training):
    three_labels = tmp_path / "mnli_model"
    tiny_model("bert").save_pretrained(three_labels)  # 3 labels; RTE has 2
    tiny_tokenizer.save_pretrained(three_labels)
    problems = refusal([
        *tiny_run_overrides(tiny_base, glue_dir, tmp_path), f"model.predecessor={three_labels}",
        "data.max_length=1000", "theseus.successor_layers=9",
    ])  # fmt: skip
    assert problems[0].startswith("theseus.successor_layers=9 must be between 1 and the predecessor's 4 layers")
    assert problems[1].startswith("data.max_length=1000 is more than")
    assert problems[2].startswith(f"model.predecessor: {three_labels} does not fit RTE: its head predicts 3 labels")
    qnli = tmp_path / "qnli_model"  # RTE's labels, another task's training
    tiny_model("bert", num_labels=2, finetuning_task="qnli").save_pretrained(qnli)
    tiny_tokenizer.save_pretrained(qnli)
    assert refusal([*tiny_run_overrides(tiny_base, glue_dir, tmp_path), f"model.predecessor={qnli}"]) == [
        f"model.predecessor: {qnli} does not fit RTE: it was fine-tuned on QNLI, not RTE (its config.json's "
        "finetuning_task; remove it if it is wrong)."
    ]
    # one this project fine-tuned from a QNLI base before configs and records named their task: its config names
    # the base's task, not its own
    (qnli / "predecessor.json").write_text(json.dumps({"base": "a-qnli-model", "dev_metrics": {}}))
    check_fits_task(str(qnli), glue_task("RTE"))
    # one this project fine-tuned on QNLI since (a cache folder given as model.predecessor) is checked by its config
    (qnli / "predecessor.json").write_text(json.dumps({"base": "a-bert", "task": "QNLI", "dev_metrics": {}}))
    with pytest.raises(ValueError, match="it was fine-tuned on QNLI, not RTE"):
        check_fits_task(str(qnli), glue_task("RTE"))


def test_a_model_folder_without_its_tokenizer_or_weights_is_refused(
    tiny_base, tiny_tokenizer, glue_dir, tmp_path, no_training
):
    """Without a tokenizer transformers made up one of an empty vocabulary (the run trained on unknown tokens and
    shipped that tokenizer); without weights the run failed loading them, after its checks had passed."""
    no_tokenizer, no_weights = tmp_path / "no_tokenizer", tmp_path / "no_weights"
    tiny_model("bert", num_labels=2).save_pretrained(no_tokenizer)
    tiny_tokenizer.save_pretrained(no_weights)
    (no_weights / "config.json").write_bytes((no_tokenizer / "config.json").read_bytes())
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    assert refusal([*overrides, f"model.predecessor={no_tokenizer}"]) == [
        f"model.predecessor='{no_tokenizer}' (model and tokenizer): {no_tokenizer} holds no tokenizer (tokenizer.json, "
        "tokenizer_config.json, vocab.txt, ...). Fix: copy the model's files into it (model.save_pretrained(folder) "
        "and tokenizer.save_pretrained(folder) write them)."
    ]
    assert refusal([*overrides, f"model.base={no_weights}"]) == [
        f"model.base='{no_weights}' (model and tokenizer): {no_weights} holds no weights (model.safetensors or "
        "pytorch_model.bin). Fix: copy the model's files into it (model.save_pretrained(folder) and "
        "tokenizer.save_pretrained(folder) write them)."
    ]


def test_a_schedule_that_cannot_finish_is_refused_unless_allowed(tiny_base, glue_dir, tmp_path):
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "schedule_steps=6"]  # p = 1 at step 6 of 6
    (problem,) = refusal(overrides)
    assert problem.startswith("The replacement schedule reaches p = 1 at step 6 but the run has 6 optimizer steps")
    assert "allow_unfinished_schedule=true" in problem
    epochs = [*overrides, "trainer.max_steps=-1", "trainer.max_epochs=1"]  # 24 rows in batches of 4: 6 steps
    assert refusal(epochs)[0].startswith("The replacement schedule reaches p = 1 at step 6 but the run has 6")

    results = run(compose_config(*overrides, "allow_unfinished_schedule=true"))
    assert (results.steps, results.switch_step, results.successor_finetuning_steps) == (6, 6, 0)
    finished = run(compose_config(*overrides[:-1], "schedule_steps=3", f"paths.output_dir={tmp_path / 'done'}"))
    assert finished.successor_finetuning_steps == 3


def test_a_learning_rate_restart_outside_the_run_or_the_warm_up_is_refused(tiny_base, glue_dir, tmp_path, no_training):
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "theseus.lr_schedule=per_phase"]
    late = refusal([*overrides, "schedule_steps=6", "allow_unfinished_schedule=true"])  # the switch at the last step
    assert late == [
        "theseus.lr_schedule=per_phase restarts the learning rate at the switch to successor fine-tuning, step 6, "
        "which must lie after the warm-up (0 steps) and before the last step (6)."
    ]
    early = refusal([*overrides, "schedule_steps=3", "optimizer.warmup_ratio=0.5"])
    assert early[0].endswith("step 3, which must lie after the warm-up (3 steps) and before the last step (6).")


def test_a_schedule_that_cannot_finish_is_said_with_the_other_problems(tiny_base, glue_dir, tmp_path, no_training):
    problems = refusal([*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "schedule_steps=6", "optimizer.lr=abc"])
    assert problems[0].startswith("optimizer.lr='abc' must be a number above 0")
    assert problems[1].startswith("The replacement schedule reaches p = 1 at step 6 but the run has 6 optimizer steps")


def test_a_validation_interval_lightning_cannot_count_is_refused_with_its_own_fix(
    tiny_base, glue_dir, tmp_path, no_training
):
    """A share of an epoch with validation counted over the whole run: Lightning refuses it, and the refusal names
    the two settings and the fix, not a strategy."""
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    [problem] = refusal([*overrides, "trainer.val_check_interval=0.5"])
    assert problem.startswith("trainer.val_check_interval=0.5 is a share of an epoch, which Lightning takes only where")
    assert problem.endswith("Fix: a whole number of steps (trainer.val_check_interval=100), or "
                            "trainer.check_val_every_n_epoch=1.")  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_a_trainer_setting_lightning_refuses_is_named_with_lightnings_reason_not_a_strategy_fix(
    tiny_base, glue_dir, tmp_path, no_training
):
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    precision, validation = refusal([*overrides, "trainer.precision=17", "+trainer.limit_val_batches=-1"])
    assert precision.startswith("trainer.precision=17: Lightning refuses it: Precision 17 is invalid.")
    assert precision.endswith("Fix: trainer.precision=auto (bf16-mixed where it is faster, else 32-true), 32-true or "
                              "bf16-mixed.")  # fmt: skip
    assert validation == ("trainer.limit_val_batches=-1: Lightning refuses it: You have passed invalid value -1 for "
                          "limit_val_batches, it has to be in [0.0, 1.0] or an int.")  # fmt: skip
    [plugin] = refusal([*overrides, "trainer.precision=transformer-engine"])  # a ModuleNotFoundError's traceback
    assert plugin.startswith("trainer.precision=transformer-engine: Lightning refuses it: ")
    assert "transformer" in plugin and plugin.endswith("32-true or bf16-mixed.")
    [placement] = refusal([*overrides, "trainer.strategy=fsdp"])  # a combination: the placement, and its fix
    assert placement.startswith(
        "Lightning refuses the trainer settings (trainer.accelerator=cpu, trainer.strategy=fsdp"
    )
    assert "Fix: a strategy Lightning offers on this accelerator" in placement
    assert not (tmp_path / "run").exists()


def test_a_run_that_would_train_nothing_or_divide_by_zero_steps_is_refused_whatever_else_is_wrong(
    tiny_base, glue_dir, tmp_path, no_training
):
    """With another problem the data files are read and the schedule counted too: a zero accumulation must not
    reach that count (a ZeroDivisionError under a traceback once)."""
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "trainer.max_steps=-1", "trainer.max_epochs=2"]
    problems = refusal([*overrides, "+trainer.accumulate_grad_batches=0", "data.max_length=1"])
    assert [problem.split(" must ")[0] for problem in problems] == [
        "data.max_length=1", "trainer.accumulate_grad_batches=0"
    ]  # fmt: skip


def test_a_validation_interval_longer_than_an_epoch_counted_within_epochs_is_refused_before_compute(
    tiny_base, glue_dir, tmp_path, no_training
):
    """Lightning refuses it only as the method's training starts, after the predecessor's fine-tuning."""
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "trainer.check_val_every_n_epoch=1"]
    [problem] = refusal([*overrides, "trainer.val_check_interval=100"])
    assert problem == (  # tiny_run_overrides: 24 training rows in batches of 4
        "trainer.val_check_interval=100 counts batches within each epoch (trainer.check_val_every_n_epoch=1), and an "
        "epoch here is 6 batches (24 rows, 4 a batch): the run would never validate, and Lightning refuses it once "
        "training starts. Fix: trainer.val_check_interval=6 or less, or trainer.check_val_every_n_epoch=null (batches "
        "counted over the whole run)."
    )
    assert refusal_problems(compose_config(*overrides, "trainer.val_check_interval=6")) == []  # one an epoch: fine
    assert not (tmp_path / "run").exists()


def test_a_callback_monitoring_a_value_the_run_never_logs_is_refused_before_compute(
    tiny_base, glue_dir, tmp_path, no_training
):
    """Lightning refuses it only at the first validation, after the predecessor's fine-tuning; a value the task's
    metrics give (RTE: accuracy) is taken."""
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    [best, early] = refusal([*overrides, "callbacks.early_stopping.monitor=val/nope",
                             "callbacks.model_checkpoint.monitor=val/f1"])  # fmt: skip
    logged = "it logs val/loss, val/accuracy, val/score, train/loss."
    assert early == f"callbacks.early_stopping.monitor=val/nope: this run logs no such value; {logged}"
    assert best == f"callbacks.model_checkpoint.monitor=val/f1: this run logs no such value; {logged}"
    chosen = [*overrides, "callbacks.early_stopping.monitor=val/loss", "callbacks.early_stopping.mode=min",
              "callbacks.model_checkpoint.monitor=val/accuracy"]  # fmt: skip
    assert refusal_problems(compose_config(*chosen)) == []
    assert not (tmp_path / "run").exists()
