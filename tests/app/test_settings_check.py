"""Every option users type is checked before anything starts, and all problems are reported together."""

import pytest
import yaml
from app_runs import compose_config, setting_problems, tiny_run_overrides
from test_app import EXPERIMENTS

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.run.pipeline import run


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_passes_as_shipped(experiment):
    assert setting_problems(compose_config(f"+experiment={experiment}")) == []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("theseus.successor_layers=abc", "theseus.successor_layers='abc' must be a whole number of layers"),
        ("theseus.successor_layers=2.5", "theseus.successor_layers=2.5 must be a whole number of layers"),
        ("theseus.init=foo", "theseus.init='foo' must be one of bottom, top, every_other, block_influence"),
        (
            "theseus.init=block_influence",
            "theseus.init=block_influence starts successors from the layers of most "
            "block influence on language-model windows: decoder-LM runs only",
        ),
        ("evaluation.lm_eval.tasks=[sst2_local]", "evaluation.lm_eval.tasks=['sst2_local'] scores a decoder LM with"),
        ("+method.teacher=adapted", "method.teacher=adapted adapts a decoder LM's predecessor to its text; an encoder"),
        ("finetune.steps=5", "finetune.steps=5 adapts a decoder LM's predecessor to its text"),
        ("deploy.gguf=[f16]", "deploy.gguf=['f16'] writes a decoder LM for llama.cpp; an encoder ships as ONNX"),
        ("evaluation.lm_eval.limit=0", "evaluation.lm_eval.limit=0 must be null (every example) or a whole number"),
        ("evaluation.lm_eval.tasks=sst2", "evaluation.lm_eval.tasks='sst2' must be a list of lm-eval task names"),
        ("optimizer.lr=abc", "optimizer.lr='abc' must be a number above 0"),
        ("optimizer.lr=0", "optimizer.lr=0 must be a number above 0"),
        ("optimizer.lr=inf", "optimizer.lr=inf must be a number above 0"),  # every weight NaN, recorded as a win
        ("finetune.lr=-inf", "finetune.lr=-inf must be a number above 0"),
        ("optimizer.weight_decay=nan", "optimizer.weight_decay=nan must be a number, 0 or more"),
        ("finetune.epochs=0", "finetune.epochs=0 must be a whole number of epochs"),
        ("seed=abc", "seed='abc' must be a whole number from 0 to 4294967295"),
        ("data.batch_size=0", "data.batch_size=0 must be a whole number, at least 1"),
        ("data.max_length=0", "data.max_length=0 must be null (the task's own) or at least 2 tokens"),
        ("data.max_eval_samples=0", "data.max_eval_samples=0 must be null (all rows)"),
        ("trainer.val_check_interval=0", "trainer.val_check_interval=0 must be a whole number of steps"),
        ("trainer.check_val_every_n_epoch=0", "trainer.check_val_every_n_epoch=0 must be null (validations"),
        ("trainer.max_steps=0", "trainer.max_steps=0 must be at least 1"),
        ("trainer.max_epochs=0", "trainer.max_epochs=0 must be -1 (the run ends at trainer.max_steps) or a whole"),
        ("+trainer.limit_train_batches=0", "trainer.limit_train_batches=0 must be a whole number of batches an epoch"),
        ("+trainer.limit_train_batches=1.5", "trainer.limit_train_batches=1.5 must be a whole number of batches"),
        ("+trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches=0 must be a whole number of batches"),
        ("optimizer.warmup_ratio=1.5", "optimizer.warmup_ratio=1.5 must be a share of the steps in [0, 1)"),
        ("optimizer.weight_decay=abc", "optimizer.weight_decay='abc' must be a number, 0 or more"),
        ("finetune.warmup_ratio=-0.1", "finetune.warmup_ratio=-0.1 must be a share of the steps in [0, 1)"),
        (
            "+optimizer.wieght_decay=0.1",
            "optimizer.wieght_decay is no setting of the optimizer group: did you mean optimizer.weight_decay?",
        ),
        (
            "+finetune.betas=[0.9,0.99]",
            "finetune.betas is no setting of the finetune group: its settings are epochs, "
            "lr, weight_decay, warmup_ratio, steps.",
        ),
        ("replacement.b=abc", "replacement.b='abc' must be a number."),
        ("logger.wandb.init_timeout=0", "logger.wandb.init_timeout=0 must be a number of seconds above 0"),
        ("threads=0", "threads=0 must be null (torch's default) or a whole number of threads"),
        ("checkpoint.every_n_steps=0", "checkpoint.every_n_steps=0 must be null (at validations only)"),
        ("allow_unfinished_schedule=maybe", "allow_unfinished_schedule='maybe' must be true or false"),
        ("theseus.finetune_shared=maybe", "theseus.finetune_shared='maybe' must be true or false"),
        ("theseus.lr_schedule=cosine", "theseus.lr_schedule='cosine' must be one of one_decay, per_phase"),
        ("checkpoint.keep=maybe", "checkpoint.keep='maybe' must be true or false"),
        ("benchmark.repeats=-1", "benchmark.repeats=-1 must be 0 (no speed-up measured) or a whole number"),
        ("benchmark.batch_size=0", "benchmark.batch_size=0 must be a whole number of dev rows"),
        # These reached torch's DataLoader or Lightning's EarlyStopping as a traceback, or ran on text taken as true.
        ("data.num_workers=-1", "data.num_workers=-1 must be 0 (rows loaded in the training process) or a whole"),
        ("data.num_workers=abc", "data.num_workers='abc' must be 0 (rows loaded in the training process)"),
        (
            "callbacks.early_stopping.patience=abc",
            "callbacks.early_stopping.patience='abc' must be a whole number of validations without gain, at least 1",
        ),
        ("callbacks.early_stopping.patience=0", "callbacks.early_stopping.patience=0 must be a whole number"),
        ("evaluation.single_modules=no", "evaluation.single_modules='no' must be true or false."),
        ("data.regression=yes", "data.regression='yes' must be true or false."),
        ("data.group_by_length=maybe", "data.group_by_length='maybe' must be true or false."),
        ("data.pad_to_max_length=1", "data.pad_to_max_length=1 must be true or false."),
        # null passed where an absent option was let pass, and raised a TypeError at the first batch or validation
        ("logger.wandb.enabled=no", "logger.wandb.enabled='no' must be true or false."),
        ("data.num_workers=null", "data.num_workers=None must be 0 (rows loaded in the training process)"),
        ("callbacks.early_stopping.patience=null", "callbacks.early_stopping.patience=None must be a whole number"),
        ("+trainer.accumulate_grad_batches=null", "trainer.accumulate_grad_batches=None must be a whole number"),
        # Lightning took these as they came and raised at train start or the first validation, after compute
        ("data.seed=abc", "data.seed='abc' must be a whole number from 0 to"),
        ("trainer.log_every_n_steps=abc", "trainer.log_every_n_steps='abc' must be a whole number of steps"),
        ("trainer.num_sanity_val_steps=abc", "trainer.num_sanity_val_steps='abc' must be 0 (none), a whole number"),
        ("callbacks.progress_bar.refresh_rate=abc", "callbacks.progress_bar.refresh_rate='abc' must be 0 (no bar)"),
        ("callbacks.early_stopping.mode=abc", "callbacks.early_stopping.mode='abc' must be max (a score) or min"),
        ("paths.cache_dir=123", "paths.cache_dir=123 must be a folder"),
        # each became a path: tokenised data written two levels above the cache, nested folders, a file-name error
        ("data.task=../../trav/escaped", "data.task='../../trav/escaped' must be null (named after your files), a"),
        ("data.task=a/b", "data.task='a/b' must be null (named after your files), a GLUE task (e.g. RTE) or a name"),
        (f"data.task={'x' * 300}", f"data.task='{'x' * 300}' must be null (named after your files)"),
        # the card said "The predecessor is `123` fine-tuned" and base_model: 123
        ("model.hub_id=123", "model.hub_id=123 must be null or the hub id of the model named"),
        ("model.hub_id='no such model, really'", "model.hub_id='no such model, really' must be null or the hub id"),
    ],
)
def test_each_bad_value_is_named_with_what_is_valid(override, message):
    (problem,) = setting_problems(compose_config(override))
    assert problem.startswith(message)


def test_a_cache_that_is_a_file_is_refused_naming_the_variable_it_came_from(tmp_path, monkeypatch):
    """THESEUS_PL_CACHE naming a file ended the run with a traceback when it first wrote there, after the data."""
    a_file = tmp_path / "cache"
    a_file.write_text("")
    monkeypatch.setenv("THESEUS_PL_CACHE", str(a_file))
    (problem,) = setting_problems(compose_config())
    assert problem.startswith(f"paths.cache_dir='{a_file}' must be a folder you can write to")
    assert "$THESEUS_PL_CACHE" in problem
    (problem,) = setting_problems(compose_config(f"paths.cache_dir={a_file / 'below'}"))
    assert problem.startswith(f"paths.cache_dir='{a_file / 'below'}' must be a folder you can write to")
    assert setting_problems(compose_config(f"paths.cache_dir={tmp_path / 'new' / 'cache'}")) == []
    monkeypatch.setenv("THESEUS_PL_CACHE", "~/cache")  # quoted in a shell: nothing expands it, a folder ~ was made
    (problem,) = setting_problems(compose_config())
    assert problem.startswith("paths.cache_dir='~/cache' must be a folder you can write to")


def test_own_files_beside_the_demos_source_are_refused_not_ignored(tmp_path):
    """+experiment=demo data.files=... trained on the demo's Rotten Tomatoes rows, named after the files' task."""
    files = f"data.files={{train: {tmp_path / 'a.csv'}, validation: {tmp_path / 'b.csv'}}}"
    (problem,) = setting_problems(compose_config("+experiment=demo", files))
    assert problem == ("data.files: not read, the data group reads RottenTomatoesSource (data.source); add "
                       "data.source=null to read data.files instead.")  # fmt: skip
    assert setting_problems(compose_config("+experiment=demo", files, "data.source=null")) == []


def test_the_label_column_named_as_text_is_refused_with_the_text_columns_alone():
    (problem,) = setting_problems(compose_config("data.text_columns=[text,label]"))
    assert problem == ("data.text_columns=['text', 'label'] names the label column 'label' (data.label_column) as "
                       "text: name the text columns only, e.g. data.text_columns=[text].")  # fmt: skip
    assert setting_problems(compose_config("data.text_columns=[text,stars]", "data.label_column=stars")) != []
    assert setting_problems(compose_config("data.text_columns=[text,stars]")) == []


def test_a_file_given_twice_is_refused_naming_both_places(tmp_path):
    """Training rows as the validation split, or a decoder's text folder twice: no word, and a card saying the
    scores are on rows "the run never trained on"."""
    rows = tmp_path / "rows.csv"
    (problem,) = setting_problems(
        compose_config(f"data.files={{train: {rows}, validation: {tmp_path}/../{tmp_path.name}/rows.csv}}")
    )
    assert problem.startswith(
        f"data.files.validation={tmp_path}/../{tmp_path.name}/rows.csv is data.files.train's file"
    )
    (problem,) = setting_problems(compose_config("+experiment=smollm2_quick", f"data.files=[{tmp_path},{tmp_path}]"))
    assert problem.startswith(f"data.files[1]={tmp_path} is data.files[0]'s file again: the scores would be on")
    assert setting_problems(compose_config(f"data.files={{train: {rows}, validation: {tmp_path / 'dev.csv'}}}")) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["replacement=constant", "+replacement.b=0.9"],  # b: 0.9 was recorded for a schedule that never reads it
         "replacement.b=0.9: replacement=constant reads replacement.p, replacement.switch_step only; it would be "
         "recorded as the run's and never read."),
        (["+benchmark.warmup=1"], "benchmark.warmup is no setting of the benchmark group: its settings are"),
        (["+checkpoint.every_n_step=5"], "checkpoint.every_n_step is no setting of the checkpoint group: did you "
                                         "mean checkpoint.every_n_steps?"),
        (["+evaluation.lm_eval.limt=3"], "evaluation.lm_eval.limt is no setting of the evaluation.lm_eval group: did "
                                         "you mean evaluation.lm_eval.limit?"),
        # Hydra's instantiate raised a TypeError (unexpected keyword) once the run had begun, .hydra/ left
        (["+data.max_lenght=64"], "data.max_lenght is no setting of TextTaskDataModule: did you mean data.max_length?"),
        (["+callbacks.early_stopping.foo=1"], "callbacks.early_stopping.foo is no setting of EarlyStopping: it takes "
                                              "monitor, min_delta, patience"),
        (["+theseus.successor.foo=1"], "theseus.successor.foo is no setting of copied_layer: it takes module_layers"),
        (["+callbacks.mine._target_=no.such.Callback"], "callbacks.mine._target_=no.such.Callback: no class or "
                                                        "function of that name can be imported."),
        # recorded in results.json as the run's settings, and never read
        (["+model.revision=v2"], "model.revision is no setting of the model group: its settings are base, "
                                 "predecessor, hub_id, gguf."),
        (["+paths.cache=/data"], "paths.cache is no setting of the paths group: did you mean paths.cache_dir?"),
        (["+logger.csv=false"], "logger.csv is no setting of the logger group: its settings are wandb."),
        (["+logger.wandb.projet=mine"], "logger.wandb.projet is no setting of the logger.wandb group: did you mean "
                                        "logger.wandb.project?"),
    ],
)  # fmt: skip
def test_a_value_nothing_reads_is_refused_not_recorded(overrides, message):
    (problem,) = setting_problems(compose_config(*overrides))
    assert message in problem


@pytest.mark.parametrize("experiment", ["minilm_embedding_quick", "minilm_embedding_pairs", "smollm2_quick"])
def test_a_held_out_split_drawn_anew_in_every_process_is_refused(experiment):
    """data.split_seed=null drew the held-out rows at random in each process: a resumed run scored on other rows,
    some of them trained on, and an embedding card called them never trained on."""
    (problem,) = setting_problems(compose_config(f"+experiment={experiment}", "data.split_seed=null"))
    assert problem.startswith("data.split_seed=None must be a whole number from 0 to")


@pytest.mark.parametrize(
    ("override", "message"),
    [  # null switched the kind to data=sentences and failed on its missing keys; a list failed inside the reader
        ("data.pairs=null", "data.pairs=None must be the GLUE similarity task whose training pairs are trained on"),
        ("data.pairs=[STS-B]", "data.pairs=['STS-B'] must be the GLUE similarity task whose training pairs"),
        ("+data.max_sentences=10", "data.max_sentences is read by data=sentences; data=sentence_pairs trains on"),
    ],
)
def test_a_sentence_pairs_setting_it_cannot_read_is_refused(override, message):
    (problem,) = setting_problems(compose_config("+experiment=minilm_embedding_pairs", override))
    assert problem.startswith(message)


def yaml_value(text: str) -> object:
    """The value Hydra makes of an override's text (``64.5`` a float, ``null`` None)."""
    return yaml.safe_load(text)


@pytest.mark.parametrize("window", ["64.5", "abc", "null", "1"])
def test_a_decoder_lm_window_that_is_no_whole_number_of_tokens_is_refused_once(window):
    """64.5 passed and raised a TypeError packing the windows; text and null raised one inside the check."""
    problems = setting_problems(compose_config("+experiment=smollm2_quick", f"data.window={window}"))
    assert [problem for problem in problems if "data.window" in problem] == [
        f"data.window={yaml_value(window)!r} must be a whole number of tokens, at least 2 (a token and the one it "
        "predicts)."
    ]


def test_shortgpt_heal_is_true_or_false():
    """heal=no was text, taken as true: the run healed and its record called it the untrained removal."""
    problems = setting_problems(compose_config("+experiment=smollm2_quick", "method=shortgpt", "method.heal=no"))
    assert problems == ["method.heal='no' must be true or false."]


def test_options_only_some_groups_have_are_checked_where_they_are_set_only():
    """A sentence-embedding run's data has no num_workers, and a run without early stopping no patience."""
    assert setting_problems(compose_config("+experiment=minilm_embedding_quick")) == []
    assert setting_problems(compose_config("~callbacks.early_stopping")) == []


def test_several_problems_are_reported_together_before_anything_starts(tiny_base, glue_dir, tmp_path):
    bad = ["optimizer.lr=abc", "seed=abc", "trainer.max_steps=0", "model.base=/nowhere/model"]
    with pytest.raises(RunRefused) as raised:
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), *bad))
    lines = str(raised.value).splitlines()
    assert lines[0] == "The run cannot start (nothing was trained or logged):" and len(lines) == 5
    assert lines[-1].startswith("- model.base='/nowhere/model' (model and tokenizer): no such folder")
    assert not (tmp_path / "cache").exists() and not (tmp_path / "run").exists()


def test_a_max_length_beyond_the_models_positions_is_refused_before_training(tiny_base, glue_dir, tmp_path):
    with pytest.raises(ValueError, match=r"data\.max_length=1000 is more than .* takes: \d+ tokens"):
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "data.max_length=1000"))
    assert not (tmp_path / "cache" / "predecessors").exists()
