"""A decoder-LM run end to end on a tiny Llama: every method, the results, the export, and the refusals."""

import json
import re
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from command_runs import seed_machine_bf16
from decoder_models import tiny_bpe_tokenizer, tiny_decoder, tiny_documents, tiny_lm_tokenizer
from glue_files import write_tsv
from huggingface_hub import ModelCard
from omegaconf import OmegaConf
from raise_at_step import RaiseAtStep
from test_wandb_runs import app
from transformers import AutoModelForCausalLM, AutoTokenizer
from wandb_records import read_offline_run

from theseus_pl.app.checks import trainer as trainer_checks
from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.trainer import device_problems
from theseus_pl.app.kinds.language_model import checks as language_model_checks
from theseus_pl.app.kinds.language_model import run as language_model_run
from theseus_pl.app.predecessors import resumable_training
from theseus_pl.app.predecessors.resumable_training import interrupted_at
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, run
from theseus_pl.data.language_model import tokenized_windows, window_loader
from theseus_pl.data.text_corpus import TextFiles, text_source
from theseus_pl.deploy import main as deploy_main
from theseus_pl.deployment import gguf_stage
from theseus_pl.lightning.callbacks import DivergedError
from theseus_pl.lightning.language_model_evaluation import evaluate_language_model
from theseus_pl.publish import main as publish_main


@pytest.fixture
def tiny_lm(tmp_path):
    """A tiny Llama and its tokenizer in a folder, and a folder of 20 text files."""
    folder = tmp_path / "tiny_llama"
    tiny_decoder("llama").save_pretrained(folder)
    tiny_lm_tokenizer().save_pretrained(folder)
    return folder, _texts(tmp_path / "texts")


def _texts(folder):
    """A folder of 20 text files of the tiny documents."""
    folder.mkdir()
    for i, text in enumerate(tiny_documents(count=20, words=40)):
        (folder / f"{i:02d}.txt").write_text(text)
    return folder


def _overrides(tiny_lm, tmp_path, *more: str) -> list[str]:
    folder, texts = tiny_lm
    return [
        "+experiment=smollm2_quick", "model.gguf=null", f"model.base={folder}", f"data.files=[{texts}]",
        "data.window=8", "data.batch_size=4", "data.max_eval_windows=8", "theseus.successor_layers=2",
        "schedule_steps=3", "trainer.max_steps=6", "trainer.val_check_interval=2", "logger=csv",
        "benchmark.repeats=1", "optimizer.lr=1e-3", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'run'}", *more,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "trains"),
    [("lm_theseus", True), ("shortgpt", False), ("shortgpt_healed", True), ("lm_truncation", True),
     ("streamline", True)],
)  # fmt: skip
def test_each_method_runs_end_to_end_and_exports_a_plain_causal_lm(tiny_lm, tmp_path, method, trains):
    cfg = compose_config(*_overrides(tiny_lm, tmp_path, f"method={method}"))
    results = run(cfg)
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["kind"] == "language_model"
    assert written["successor"]["layers"] == 2 and written["predecessor"]["layers"] == 4
    assert written["steps"] == (6 if trains else 0)
    assert written["data"]["eval_tokens"] > 0
    # the loss a report tells runs apart by: the methods that can distil record their weight of the KL (0 here)
    assert written["settings"].get("method.alpha") == (0.0 if method in {"lm_theseus", "shortgpt_healed",
                                                                        "lm_truncation"} else None)  # fmt: skip
    assert 0 <= written["successor"]["agreement"] <= 1 and written["successor"]["kl"] >= 0
    assert written["successor"]["perplexity"] > 1 and written["predecessor"]["perplexity"] > 1
    assert set(written["speed"]) >= {"prefill_speedup", "decode_speedup"}
    assert written["sample"]["prompt"] and isinstance(written["sample"]["successor"], str)
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "successor").eval()
    assert exported.config.num_hidden_layers == 2
    assert results.successor.params < results.predecessor.params
    ids = torch.tensor([[5, 6, 7]])
    assert exported.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0).shape == (1, 6)
    card = ModelCard.load(tmp_path / "run" / "successor" / "README.md")
    assert card.data.pipeline_tag == "text-generation" and f"`{results.method}` method" in card.text


def test_embeddings_and_head_trained_with_the_layers_are_recorded_and_the_card_says_so(tiny_lm, tmp_path):
    predecessor = AutoModelForCausalLM.from_pretrained(tiny_lm[0])
    results = run(compose_config(*_overrides(tiny_lm, tmp_path, "method=lm_theseus", "theseus.finetune_shared=true")))
    assert results.settings["theseus.finetune_shared"] is True
    successor = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "successor")
    assert not torch.equal(successor.get_input_embeddings().weight, predecessor.get_input_embeddings().weight)
    card = (tmp_path / "run" / "successor" / "README.md").read_text()  # it said they were the predecessor's
    assert "Embeddings, final norm and head were trained with the layers once every module was replaced" in card


def test_a_run_that_ends_before_the_switch_records_no_phase_2_and_its_card_keeps_the_shared_modules(tiny_lm, tmp_path):
    """``finetune_shared`` trains embeddings and head from the switch to p = 1: where allow_unfinished_schedule let
    the run end first, the card said they were trained (they are the predecessor's)."""
    predecessor = AutoModelForCausalLM.from_pretrained(tiny_lm[0])
    results = run(compose_config(*_overrides(tiny_lm, tmp_path, "method=lm_theseus", "theseus.finetune_shared=true",
                                             "schedule_steps=8", "allow_unfinished_schedule=true")))  # fmt: skip
    assert results.steps == 6 and results.successor_finetuning_steps == 0
    assert read_run(tmp_path / "run" / "results.json").successor_finetuning_steps == 0
    successor = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "successor")
    assert torch.equal(successor.get_input_embeddings().weight, predecessor.get_input_embeddings().weight)
    card = (tmp_path / "run" / "successor" / "README.md").read_text()
    assert "were trained with the layers" not in card
    assert "Embeddings, final norm and head are the predecessor's: `theseus.finetune_shared` trains them" in card


def test_a_text_file_that_is_not_utf8_is_refused_naming_it_before_any_compute(tiny_lm, tmp_path):
    bad = tiny_lm[1] / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait".encode("latin-1"))  # a UnicodeDecodeError naming only the codec before
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(tiny_lm, tmp_path, "method=lm_truncation")))
    assert f"data.files: {bad} is not UTF-8 text (invalid continuation byte at byte 3, line 1)." in "\n".join(
        refused.value.problems
    )
    assert not (tmp_path / "run").exists()


def test_the_seed_varies_the_training_order_not_the_held_out_windows(tiny_lm, tmp_path):
    records = []
    for seed in (1, 2):
        run(compose_config(*_overrides(tiny_lm, tmp_path, "method=lm_truncation", f"seed={seed}",
                                                      f"paths.output_dir={tmp_path / str(seed)}")))  # fmt: skip
        records.append(json.loads((tmp_path / str(seed) / "results.json").read_text()))
    assert records[0]["data"] == records[1]["data"]
    assert records[0]["predecessor"]["perplexity"] == records[1]["predecessor"]["perplexity"]
    assert records[0]["successor"]["perplexity"] != records[1]["successor"]["perplexity"]


def test_a_run_names_every_problem_before_any_compute(tiny_lm, tmp_path):
    cfg = compose_config(*_overrides(tiny_lm, tmp_path, "data.window=128", "theseus.successor_layers=4"))
    with pytest.raises(RunRefused) as refused:
        run(cfg)
    problems = refused.value.problems
    assert any("data.window=128 is longer than the model's 64 positions" in p for p in problems)
    assert any("theseus.successor_layers=4 must be between 1 and 3" in p for p in problems)
    assert not (tmp_path / "run" / "results.json").exists()
    # text where numbers go: named once by the settings check, where the model's check raised a TypeError
    cfg = compose_config(*_overrides(tiny_lm, tmp_path, "data.window=abc", "theseus.successor_layers=abc"))
    with pytest.raises(RunRefused) as refused:
        run(cfg)
    named = [p.split("=")[0] for p in refused.value.problems]
    assert named.count("data.window") == 1 and named.count("theseus.successor_layers") == 1
    # an other text of no .txt file was a traceback from its fingerprint; a folder without brackets, letter by letter
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("no text file")
    cfg = compose_config(*_overrides(tiny_lm, tmp_path, f"data.other_text.files=[{tmp_path / 'notes'}]"))
    with pytest.raises(RunRefused) as refused:
        run(cfg)
    assert refused.value.problems == [f"data.other_text.files: no .txt file in {tmp_path / 'notes'}."]
    # one of the training files as the other text: only the same source as a whole was refused, and the other text,
    # recorded as never trained on, was scored partly on documents trained on
    one = tiny_lm[1] / "03.txt"
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(tiny_lm, tmp_path, f"data.other_text.files=[{one}]")))
    (problem,) = refused.value.problems
    assert problem.startswith(f"data.other_text (1 text file(s) from {one}) holds 1 document(s) of the training text")
    unbracketed = [o for o in _overrides(tiny_lm, tmp_path) if not o.startswith("data.files=")]
    cfg = compose_config(*unbracketed, f"data.files={tmp_path / 'notes'}")
    with pytest.raises(RunRefused) as refused:
        run(cfg)
    assert refused.value.problems[0].startswith(f"data.files={tmp_path / 'notes'} must be a list of text files")


def test_a_language_model_run_goes_through_the_same_settings_checks_as_an_encoder_run(
    tiny_lm, tmp_path, tiny_base, glue_dir
):
    bad = ["seed=abc", "optimizer.lr=0", "resume=maybe"]
    with pytest.raises(RunRefused) as language_model:
        run(compose_config(*_overrides(tiny_lm, tmp_path, *bad)))
    with pytest.raises(RunRefused) as task_model:
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path / "encoder"), *bad))
    expected = [
        "seed='abc' must be a whole number from 0 to 4294967295.",
        "optimizer.lr=0 must be a number above 0, e.g. 2e-5.",
        "resume='maybe' must be true (continue), false (start afresh) or force (redo a finished run).",
    ]
    assert language_model.value.problems == task_model.value.problems == expected
    assert str(language_model.value).startswith("The run cannot start (nothing was trained or logged):")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        ("deploy.quantize=int8", "deploy.quantize=int8: the deploy group exports an encoder successor to ONNX"),
        ("deploy.onnx=true", "deploy.onnx=true: the deploy group exports an encoder successor to ONNX"),
        ("deploy.sequence_length=64", "deploy.sequence_length=64: the deploy group exports an encoder successor"),
        ("deploy.llama_cpp=maybe", "deploy.llama_cpp='maybe' must be auto, true or false"),
        ("theseus.successor.intermediate_size=16", "theseus.successor.intermediate_size=16 narrows encoder successors"),
        ("evaluation.single_modules=true", "evaluation.single_modules=true scores each Theseus module alone on a task"),
        ("finetune.epochs=2", "finetune.epochs=2: a decoder-LM run compresses its predecessor as given"),
        ("data.max_eval_windows=0", "data.max_eval_windows=0 must be null (every held-out window) or a whole number"),
        ("data.split_seed=abc", "data.split_seed='abc' must be a whole number from 0 to 4294967295."),
        ("data.held_out=abc", "data.held_out=abc must be between 0 and 1 (the share of documents held out)."),
        # the encoders' callbacks monitor val/score, which no LM run logs: a crash at the first validation
        ("callbacks=default", "callbacks.model_checkpoint and callbacks.early_stopping: a decoder-LM run trains"),
    ],
)
def test_a_setting_a_language_model_run_does_not_read_is_refused_not_ignored(tiny_lm, tmp_path, override, refusal):
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(tiny_lm, tmp_path, override)))
    (problem,) = refused.value.problems
    assert problem.startswith(refusal)


def test_a_schedule_that_never_ends_replacing_is_refused_as_on_an_encoder_run(tiny_lm, tmp_path):
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(tiny_lm, tmp_path, "schedule_steps=10")))
    (problem,) = refused.value.problems
    assert problem.startswith("The replacement schedule reaches p = 1 at step 10 but the run has 6 optimizer steps")
    assert not (tmp_path / "run").exists()


def test_a_validation_interval_longer_than_an_epoch_of_windows_is_refused_before_anything_trains(
    tiny_lm, tmp_path, monkeypatch
):
    """The windows are counted as the text is tokenised, after the first checks: Lightning would refuse the interval
    under a traceback once training starts."""
    monkeypatch.setattr(pl.Trainer, "fit", lambda *args, **kwargs: pytest.fail("a Trainer started"))
    overrides = _overrides(tiny_lm, tmp_path, "trainer.check_val_every_n_epoch=1", "trainer.val_check_interval=1000")
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides))
    (problem,) = refused.value.problems
    windows = re.search(r"an epoch here is (\d+) batches \((\d+) training windows, 4 a batch\)", problem)
    assert problem.startswith("trainer.val_check_interval=1000 counts batches within each epoch")
    assert windows and int(windows[1]) == -(-int(windows[2]) // 4) < 1000
    assert problem.endswith(f"Fix: trainer.val_check_interval={windows[1]} or less, or "
                            "trainer.check_val_every_n_epoch=null (batches counted over the whole run).")  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_an_encoder_method_on_a_language_model_is_refused(tiny_lm, tmp_path):
    with pytest.raises(
        RunRefused,
        match=r"method=pkd compresses encoder task models \(classifiers and regressors\); on a language model .*"
        r"lm_theseus",
    ):
        run(compose_config(*_overrides(tiny_lm, tmp_path, "method=pkd")))


def test_lm_eval_tasks_are_scored_for_both_models_offline_and_the_predecessor_once(tiny_lm, tmp_path, monkeypatch):
    folder, _ = tiny_lm
    tokenizer = tiny_lm_tokenizer()
    tokenizer.add_tokens(["negative", "positive", "True", "False"])  # the answers, within the tiny decoder's vocabulary
    tokenizer.save_pretrained(folder)
    rows = [["the economy", "1"], ["jobs", "0"], ["the nation is new", "1"], ["not the work", "0"], ["school", "1"]]
    write_tsv(tmp_path / "glue" / "SST-2" / "dev.tsv", [["sentence", "label"], *rows])
    scored = []
    monkeypatch.setattr(language_model_run, "harness_scores", _recording(language_model_run.harness_scores, scored))
    for method in ("shortgpt", "lm_truncation"):
        overrides = _overrides(tiny_lm, tmp_path, f"method={method}", "evaluation.lm_eval.tasks=[sst2_local]",
                               f"evaluation.lm_eval.glue_dir={tmp_path / 'glue'}", "resume=force")  # fmt: skip
        results = run(compose_config(*overrides))
        written = json.loads((tmp_path / "run" / "results.json").read_text())
        for side in ("predecessor", "successor"):
            correct = written[side]["lm_eval"]["sst2_local"]["acc"] * len(rows)
            assert 0 <= correct <= len(rows) and correct == pytest.approx(round(correct))
        assert "final/successor_sst2_local_acc" in results.summary()
        assert "lm_eval" not in written["failed_steps"]
        assert written["peak_memory"]["cpu_mb"] > 100 and written["peak_memory"]["cpu_since"] == "run"
    assert scored == [4, 2, 2]  # the predecessor (4 layers) once, then each run's successor (2 layers)
    # on the first examples only: recorded (the report warns of a row pooling it with whole tasks), and the card says so
    results = run(compose_config(*overrides, "evaluation.lm_eval.limit=3"))
    assert results.settings["evaluation.lm_eval.limit"] == 3
    card = (tmp_path / "run" / "successor" / "README.md").read_text()
    assert "| lm-eval `sst2_local` (its first 3 examples) acc (%) |" in card


def _recording(score, layers: list[int]):
    """``score`` that notes the layers of each model it scores."""

    def recorded(model, *args, **kwargs):
        layers.append(model.config.num_hidden_layers)
        return score(model, *args, **kwargs)

    return recorded


def test_lm_eval_tasks_that_cannot_be_scored_are_refused_before_any_compute(tiny_lm, tmp_path, glue_dir):
    overrides = _overrides(tiny_lm, tmp_path, "evaluation.lm_eval.tasks=[sst2_local]")
    with pytest.raises(RunRefused, match=r"sst2_local read\(s\) a local GLUE folder: give evaluation.lm_eval.glue_dir"):
        run(compose_config(*overrides))
    with pytest.raises(RunRefused, match=r"evaluation.lm_eval.glue_dir: .*SST-2/dev.tsv"):
        run(compose_config(*overrides, f"evaluation.lm_eval.glue_dir={glue_dir}"))  # RTE only
    with pytest.raises(RunRefused, match=r"evaluation.lm_eval.include_path=.*nowhere is not a folder of task YAMLs"):
        run(compose_config(*_overrides(tiny_lm, tmp_path, "evaluation.lm_eval.tasks=[mine]",
                                       f"evaluation.lm_eval.include_path={tmp_path / 'nowhere'}")))  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_a_missing_gguf_file_is_refused(tiny_lm, tmp_path):
    overrides = [o for o in _overrides(tiny_lm, tmp_path) if not o.startswith("model.")]
    with pytest.raises(RunRefused, match=r"model.gguf: no file at .*absent.gguf"):
        run(compose_config(*overrides, f"model.gguf={tmp_path / 'absent.gguf'}", "model.base=null"))


@pytest.mark.slow
def test_a_model_named_by_two_settings_is_refused_not_chosen_between(tiny_lm, tmp_path):
    # +experiment=smollm2_quick model.base=MY_LM compressed the experiment's GGUF file, and the config named MY_LM
    overrides = [o for o in _overrides(tiny_lm, tmp_path) if o != "model.gguf=null"]
    with pytest.raises(RunRefused, match=r"model: model.gguf=.* and model.base=.* each name the model to compress"):
        run(compose_config(*overrides, f"model.gguf={tmp_path / 'any.gguf'}"))
    assert not (tmp_path / "run").exists()


def test_an_lm_run_whose_training_diverges_stops_there_and_records_nothing(tiny_lm, tmp_path):
    overrides = [o for o in _overrides(tiny_lm, tmp_path, "method=lm_theseus") if not o.startswith("optimizer.lr")]
    with pytest.raises(DivergedError, match=r"^The training diverged .* Lower optimizer\.lr \(now 1e\+08\)"):
        run(compose_config(*overrides, "optimizer.lr=1e8"))
    assert not (tmp_path / "run" / "results.json").exists()


def test_the_packaged_smollm2_is_compressed_from_its_gguf_file(tmp_path, smollm2_cache):
    """The real decoder, offline: SmolLM2's GGUF file converted (by the fixture, once a pytest run), the speeches
    tokenised, ShortGPT's removal, and the successor written back as GGUF Q8_0 with the predecessor file's tokenizer.
    Its speed is not timed (16 s of its 48 on one AMX core), and the other held-out text is scored on 4 windows, not
    32 (4 s of its 28 on one AVX-512 core): the tiny decoders' runs time theirs and check the other text's scores."""
    cfg = compose_config(
        "+experiment=smollm2_quick", "method=shortgpt", "data.window=32", "data.max_eval_windows=4",
        "data.other_text.max_windows=4",
        "theseus.successor_layers=20", "logger=csv", "benchmark.repeats=0", f"paths.cache_dir={smollm2_cache}",
        f"paths.output_dir={tmp_path / 'run'}", "deploy.gguf=[q8_0]", "deploy.llama_cpp=false",
    )  # fmt: skip
    results = run(cfg)
    (q8_0,) = results.gguf
    assert q8_0["agreement"] >= 0.95 and abs(q8_0["perplexity"] / results.successor.perplexity - 1) < 0.05
    exported = AutoTokenizer.from_pretrained(tmp_path / "run" / "successor" / "gguf", gguf_file="model.q8_0.gguf")
    assert (
        exported("The nation's economy")["input_ids"]
        == AutoTokenizer.from_pretrained(tmp_path / "run" / "successor")("The nation's economy")["input_ids"]
    )
    assert results.predecessor.origin == "gguf" and results.predecessor.layers == 30
    assert results.successor.layers == 20
    assert results.data.source.startswith("speeches of the 2012 US party conventions")
    assert results.predecessor.perplexity < results.successor.perplexity  # ten layers removed, nothing healed
    assert results.sample.predecessor.startswith(' is "the most important thing that we')


@pytest.mark.slow
@pytest.mark.parametrize("method", ["shortgpt", "lm_theseus"])  # without and with training
def test_every_lm_run_ends_its_wandb_run_with_the_final_numbers_and_the_sample(tiny_lm, tmp_path, monkeypatch, method):
    monkeypatch.setenv("WANDB_MODE", "offline")
    overrides = [o for o in _overrides(tiny_lm, tmp_path, f"method={method}") if o != "logger=csv"]
    results = run(compose_config(*overrides, "logger.wandb.mode=offline"))
    (folder,) = (tmp_path / "run" / "wandb").glob("offline-run-*")
    logged = read_offline_run(folder)
    assert logged.exit_code == 0 and logged.job_type == results.method
    assert logged.summary["final/successor_perplexity"] == pytest.approx(results.successor.perplexity)
    assert logged.summary["final/decode_speedup"] == pytest.approx(results.speed["decode_speedup"])
    assert "results.json" in logged.files
    assert any(name.startswith("media/table/generation_sample") for name in logged.files)
    assert results.wandb is not None and results.wandb.dir == str(folder)
    assert json.loads((tmp_path / "run" / "results.json").read_text())["wandb"]["id"] == logged.id


def test_an_interrupted_lm_run_resumes_and_ends_as_an_uninterrupted_one(tiny_lm, tmp_path):
    overrides = _overrides(tiny_lm, tmp_path, "method=lm_theseus", "benchmark.repeats=0")  # validates every 2 of 6
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *killed))
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == 4
    resumed = run(compose_config(*overrides))
    assert resumed.resumed_from == str(last) and resumed.steps == 6
    assert not last.parent.exists()  # kept while unfinished, deleted once the run has finished
    whole = run(compose_config(*overrides, f"paths.output_dir={tmp_path / 'whole'}"))
    assert resumed.successor.perplexity == whole.successor.perplexity  # the same last-step model, bit for bit


def test_an_interrupted_lm_run_is_not_resumed_onto_text_that_changed_since(tiny_lm, tmp_path):
    # files added to data.files' folder redrew the held-out documents: one trained on was scored as never trained on
    overrides = _overrides(tiny_lm, tmp_path, "method=lm_theseus", "benchmark.repeats=0")
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *killed))
    texts = tiny_lm[1]
    (texts / "20.txt").write_text((texts / "00.txt").read_text() + " again")
    refusal = r"last.ckpt \(step 4\) was trained on other data than this command's 21 text"
    for command in (plan, run):  # --check said it would resume
        with pytest.raises(RunRefused, match=refusal):
            command(compose_config(*overrides))
    (texts / "21.txt").write_text("")  # no document: the text is as it was
    (texts / "20.txt").unlink()
    kept = compose_config(*overrides, "checkpoint.keep=true")  # last.ckpt stays beside the finished record
    finished = run(kept)
    assert finished.steps == 6  # the text as it was: resumed
    (texts / "20.txt").write_text("more text")  # a finished run is left as it is, whatever the data now
    assert plan(kept)[-1].endswith("holds a finished run, which the run would leave as it is (resume=force redoes it)")
    assert run(kept) == finished


def test_a_finished_lm_run_is_left_untouched_unless_forced(tiny_lm, tmp_path):
    overrides = _overrides(tiny_lm, tmp_path, "method=shortgpt", "benchmark.repeats=0")
    first = run(compose_config(*overrides))
    written = (tmp_path / "run" / "results.json").stat().st_mtime_ns
    assert run(compose_config(*overrides)) == first
    assert (tmp_path / "run" / "results.json").stat().st_mtime_ns == written
    run(compose_config(*overrides, "resume=force"))
    assert (tmp_path / "run" / "results.json").stat().st_mtime_ns != written


@pytest.mark.parametrize(
    ("method", "compresses"),
    [
        ("shortgpt", "decoder language models"),
        ("lm_truncation", "decoder language models"),
        ("embedding_mse", "sentence-embedding models"),
    ],
)
def test_another_kinds_method_on_a_classification_task_is_refused_naming_what_it_compresses(
    method, compresses, tiny_base, glue_dir, tmp_path
):
    hint = "; on a classification or regression task use an encoder method such as theseus, fine_tuning or kd"
    with pytest.raises(RunRefused, match=rf"method={method} compresses {compresses}{hint}"):
        run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path), f"method={method}"))
    assert not (tmp_path / "cache" / "predecessors").exists()  # refused before the predecessor's fine-tuning


def test_a_hub_dataset_is_read_with_its_configuration_and_column():
    data = compose_config("+experiment=smollm2_quick", "data.hub_dataset=Salesforce/wikitext",
                          "data.hub_config=wikitext-2-raw-v1", "data.hub_column=text").data  # fmt: skip
    source = text_source(data)
    assert (source.name, source.config, source.split, source.column) == (
        "Salesforce/wikitext", "wikitext-2-raw-v1", "train", "text",
    )  # fmt: skip
    assert "wikitext-2-raw-v1" in source.fingerprint()  # another configuration is another cache entry


def _finished_run(model_and_texts, tmp_path):
    """A ShortGPT run's folder as the command line leaves it (its composed config in .hydra/)."""
    cfg = compose_config(*_overrides(model_and_texts, tmp_path, "method=shortgpt"))
    run(cfg)
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    return run_dir


def test_a_language_model_run_publishes_its_card_and_weights_and_refuses_onnx_deployment(tiny_lm, tmp_path, capsys):
    run_dir = _finished_run(tiny_lm, tmp_path)
    publish_main([str(run_dir), "--repo-id", "me/tiny-lm", "--dry-run"])
    out = capsys.readouterr().out
    listed = set(re.findall(r"^ +[\d,]+  (\S+)", out, re.M))
    assert {"README.md", "model.safetensors", "config.json", "tokenizer.json"} <= listed
    assert "pipeline_tag: text-generation" in out and "Dry run: nothing was uploaded" in out
    with pytest.raises(SystemExit) as refused:
        deploy_main([str(run_dir)])
    assert refused.value.code == 2 and capsys.readouterr().err.startswith("error: ")
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"{run_dir} is a decoder-LM run: its successor is the causal-LM folder")
    assert line.endswith("--gguf f16 q8_0.") and not (run_dir / "successor" / "onnx").exists()


def test_the_other_held_out_text_is_scored_for_both_models_on_windows_the_run_never_trained_on(tiny_lm, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text(" ".join(tiny_documents(count=3, words=40, seed=7)))
    overrides = _overrides(tiny_lm, tmp_path, "method=shortgpt_healed", f"data.other_text.files=[{other}]",
                           "data.other_text.max_windows=5", "trainer.precision=32-true")  # fmt: skip
    results = run(compose_config(*overrides))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert (
        written["data"]["other_source"].startswith("1 text file(s) from") and written["data"]["other_eval_windows"] == 5
    )
    assert written["data"]["other_eval_tokens"] == 5 * 7  # 5 full windows of 8 tokens, each predicting 7
    assert set(written["successor"]["other_text"]) == {"perplexity", "nll", "kl", "agreement"}
    assert set(written["predecessor"]["other_text"]) == {"perplexity", "nll"}
    assert written["successor"]["other_text"]["perplexity"] != written["successor"]["perplexity"]
    assert "final/successor_other_perplexity" in results.summary() and "final/successor_other_kl" in results.summary()
    assert f"on {written['data']['other_source']}: perplexity" in results.headline()
    # Scored as the held-out windows are: the same figure from the successor alone on the other text's first windows.
    windows = tokenized_windows(TextFiles([other]), tiny_lm_tokenizer(), 8, None, 0, tmp_path)["validation"].select(
        range(5)
    )
    successor = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "successor")
    alone = evaluate_language_model(successor, window_loader(windows, 4), {"accelerator": "cpu", "devices": 1})
    assert alone["perplexity"] == pytest.approx(written["successor"]["other_text"]["perplexity"], rel=1e-5)


def test_offline_the_other_held_out_text_is_the_guardian_headlines_and_none_can_be_asked_for(tiny_lm, tmp_path):
    run(compose_config(*_overrides(tiny_lm, tmp_path, "method=shortgpt")))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert (
        written["data"]["other_source"].startswith("Guardian headlines") and written["data"]["other_eval_windows"] == 32
    )
    run(compose_config(*_overrides(tiny_lm, tmp_path, "method=shortgpt", "data.other_text.corpus=null",
                                   "resume=force")))  # fmt: skip
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "other_source" not in written["data"] and "other_text" not in written["successor"]


def test_an_other_text_that_is_the_training_text_or_unknown_is_refused_in_one_message_before_any_compute(
    tiny_lm, tmp_path
):
    _, texts = tiny_lm
    overrides = _overrides(tiny_lm, tmp_path, f"data.other_text.files=[{texts}]", "data.window=100000")
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides))
    assert "data.other_text is the training text (20 text file(s)" in str(refused.value)
    assert "data.window=100000" in str(refused.value)  # the other problems of the run, in the same message
    assert not (tmp_path / "run").exists()
    known = "convention_speeches, presidential_debates_2016, guardian_headlines"
    with pytest.raises(RunRefused, match=rf"data.other_text.corpus='wiki' is not a corpus here: give one of {known}"):
        run(compose_config(*_overrides(tiny_lm, tmp_path, "data.other_text.corpus=wiki")))
    with pytest.raises(RunRefused, match=r"data.other_text.files: not found: .*nowhere"):
        run(compose_config(*_overrides(tiny_lm, tmp_path, f"data.other_text.files=[{tmp_path / 'nowhere'}]")))
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))  # its error named the setting twice
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(tiny_lm, tmp_path, f"data.other_text.files=[{tmp_path / 'latin1.txt'}]")))
    (problem,) = refused.value.problems
    assert problem.startswith(f"data.other_text.files: {tmp_path / 'latin1.txt'} is not UTF-8 text"), problem


def test_the_adapted_teacher_is_cached_reused_by_two_runs_and_scored_as_the_reference(tiny_lm, tmp_path):
    adapted = ["method.alpha=1.0", "method.teacher=adapted", "finetune.steps=4", "finetune.lr=1e-2",
               "trainer.precision=32-true", "data.other_text.corpus=null"]  # fmt: skip
    first = run(compose_config(*_overrides(tiny_lm, tmp_path, "method=shortgpt_healed", *adapted)))
    (entry,) = _entries(tmp_path / "cache" / "adapted")
    made = entry.stat().st_mtime_ns
    assert first.teacher.origin == "adapted" and first.teacher.layers == 4 and first.settings["finetune.steps"] == 4
    assert first.data.teacher_train_tokens == 4 * 4 * 8  # 4 steps of 4 windows of 8 tokens, on one device
    assert first.teacher.kl > 0 and "final/teacher_perplexity" in first.summary()
    teacher, predecessor = (AutoModelForCausalLM.from_pretrained(folder) for folder in (entry, tiny_lm[0]))
    changed = [not torch.equal(a, b) for a, b in zip(teacher.parameters(), predecessor.parameters(), strict=True)]
    assert all(changed)  # every parameter fine-tuned, the embeddings and head included
    second = run(compose_config(*_overrides(tiny_lm, tmp_path, "method=lm_theseus", "resume=force", *adapted)))
    assert _entries(tmp_path / "cache" / "adapted") == [entry]
    assert entry.stat().st_mtime_ns == made and second.teacher.perplexity == first.teacher.perplexity
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["teacher"]["dir"] == str(entry) and written["method"] == "lm_theseus_curriculum"


class StepsTrained(pl.Callback):
    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        self.steps.append(trainer.global_step)


def test_an_adaptation_interrupted_midway_continues_where_it_stopped(tiny_lm, tmp_path, monkeypatch):
    """Failed after step 3 of 4 (a checkpoint every 2), the rerun adapts the last 2 steps from its checkpoint, to the
    weights of an uninterrupted adaptation (data order, optimizer and schedule restored); ``--check`` says it would
    continue and times the rest. The adaptation was an hour or more a teacher of a real model, started over."""
    adapted = ["method=shortgpt_healed", "method.alpha=1.0", "method.teacher=adapted", "finetune.steps=4",
               "finetune.lr=1e-2", "trainer.precision=32-true", "data.other_text.corpus=null",
               "checkpoint.every_n_steps=2"]  # fmt: skip
    cfg = compose_config(*_overrides(tiny_lm, tmp_path, *adapted))
    with monkeypatch.context() as patched:
        patched.setattr(resumable_training, "progress_bars", lambda settings: [RaiseAtStep(3)])
        with pytest.raises(RuntimeError, match="planned failure at step 3"):
            run(cfg)
    (work,) = (tmp_path / "cache" / "adapted").glob(".work-*")
    assert interrupted_at(work) == 2 and not _entries(tmp_path / "cache" / "adapted")
    lines = dict(line.split(": ", 1) for line in plan(cfg))
    assert lines["teacher"].endswith("every parameter; its interrupted adaptation to the text continues from step 2 "
                                     "of 4)")  # fmt: skip
    assert "(2 batches at " in lines["time of the predecessor's adaptation to the text"]
    trained = StepsTrained()
    with monkeypatch.context() as patched:
        patched.setattr(resumable_training, "progress_bars", lambda settings: [trained])
        run(compose_config(*_overrides(tiny_lm, tmp_path, *adapted, "resume=force")))
    assert trained.steps == [2, 3]  # the rest, not the whole adaptation again
    (entry,) = _entries(tmp_path / "cache" / "adapted")
    assert not work.exists() and json.loads((entry / "adapted.json").read_text())["resumed_at_step"] == 2
    elsewhere = [f"paths.cache_dir={tmp_path / 'whole'}" if key.startswith("paths.cache_dir=") else key
                 for key in _overrides(tiny_lm, tmp_path, *adapted, "resume=force")]  # fmt: skip
    run(compose_config(*elsewhere))
    (whole,) = _entries(tmp_path / "whole" / "adapted")
    assert whole.name == entry.name and "resumed_at_step" not in json.loads((whole / "adapted.json").read_text())
    weights = [AutoModelForCausalLM.from_pretrained(folder).state_dict() for folder in (entry, whole)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[1])


def test_an_adaptation_that_diverged_caches_nothing_and_leaves_nothing_to_continue(tiny_lm, tmp_path):
    diverging = ["method=shortgpt_healed", "method.alpha=1.0", "method.teacher=adapted", "finetune.steps=4",
                 "finetune.lr=1e12", "trainer.precision=32-true", "checkpoint.every_n_steps=2"]  # fmt: skip
    with pytest.raises(RuntimeError, match=r"Adapting the predecessor diverged \(last training loss (nan|inf)\)"):
        run(compose_config(*_overrides(tiny_lm, tmp_path, *diverging)))
    assert not [path for path in (tmp_path / "cache" / "adapted").iterdir() if not path.name.endswith(".lock")]


def _entries(folder):
    """A cache folder's entries (its lock files left out)."""
    return [path for path in folder.iterdir() if not path.name.startswith(".")]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["method=shortgpt_healed", "method.alpha=1.0", "method.teacher=adapted"],
         "method.teacher=adapted distils from the predecessor fine-tuned on the training text first: give its budget, "
         "finetune.steps=N"),
        (["method=shortgpt_healed", "method.teacher=adapted"],
         "method.teacher=adapted is read by a distillation loss only: give method.alpha above 0"),
        (["method=shortgpt_healed", "finetune.steps=5"],
         "finetune.steps=5: a decoder-LM run compresses its predecessor as given"),
        (["method=shortgpt_healed", "method.teacher=teacher"], "method.teacher='teacher' must be one of predecessor"),
    ],
)  # fmt: skip
def test_an_adapted_teacher_without_what_it_needs_is_refused_before_any_compute(tiny_lm, tmp_path, overrides, message):
    with pytest.raises(RunRefused, match=re.escape(message)):
        run(compose_config(*_overrides(tiny_lm, tmp_path, *overrides)))
    assert not (tmp_path / "cache" / "adapted").exists()


def test_the_check_plan_names_the_other_text_the_lm_eval_tasks_and_the_adapted_teacher_and_makes_none(
    tiny_lm, tmp_path
):
    write_tsv(tmp_path / "glue" / "SST-2" / "dev.tsv", [["sentence", "label"], ["the economy", "1"]])
    overrides = _overrides(tiny_lm, tmp_path, "method=shortgpt_healed", "method.alpha=1.0", "method.teacher=adapted",
                           "finetune.steps=4", "evaluation.lm_eval.tasks=[sst2_local]",
                           f"evaluation.lm_eval.glue_dir={tmp_path / 'glue'}")  # fmt: skip
    lines = dict(line.split(": ", 1) for line in plan(compose_config(*overrides)))
    assert (
        lines["other held-out text"].startswith("Guardian headlines of 2017-2020")
        and "32 windows" in lines["other held-out text"]
    )
    assert re.fullmatch(
        rf"the predecessor adapted to the text \(4 windows a step at lr 2e-05, every parameter; adapted to the text "
        rf"first, 4 steps, into the cache: {re.escape(str(tmp_path / 'cache' / 'adapted'))}/[0-9a-f]{{16}}\)",
        lines["teacher"],
    )
    assert lines["time of the predecessor's adaptation to the text"].startswith("about ")
    assert "(4 batches at " in lines["time of the predecessor's adaptation to the text"]
    assert lines["loss"].startswith("1 x KL to the predecessor adapted to the text's soft targets")
    assert lines["lm-eval"] == "sst2_local on both models, 0-shot, fp32"
    assert lines["time of training"].startswith("about ") and "(6 batches at " in lines["time of training"]
    assert re.fullmatch(r"about \d+\.\d GiB at the training step's peak \(the decoder guide's formula\)",
                        lines["memory"])  # fmt: skip
    assert not (tmp_path / "cache" / "adapted").exists() and not (tmp_path / "run").exists()


def test_the_check_plan_counts_every_ddp_process_in_the_token_budget(tiny_lm, tmp_path):
    ddp = ("trainer.devices=2", "trainer.strategy=ddp_find_unused_parameters_true")
    one, two = (dict(line.split(": ", 1) for line in plan(compose_config(*_overrides(tiny_lm, tmp_path, *extra))))
                for extra in ((), ddp))  # fmt: skip
    assert one["training"] == "6 optimizer steps of 4 windows (192 tokens)"
    assert two["training"] == "6 optimizer steps of 4 windows on each of 2 processes (384 tokens)"
    assert "on each device" in two["memory"] and "on each device" not in one["memory"]


def test_activation_checkpointing_trains_the_same_successor_and_is_refused_where_nothing_trains(tiny_lm, tmp_path):
    successors = []
    for checkpointed in ("false", "true"):
        folder = tmp_path / checkpointed
        overrides = _overrides(tiny_lm, folder, f"activation_checkpointing={checkpointed}", "trainer.precision=32-true")
        run(compose_config(*overrides))
        successors.append(AutoModelForCausalLM.from_pretrained(folder / "run" / "successor").state_dict())
    plain, checkpointed = successors
    assert all(torch.allclose(plain[name], checkpointed[name], atol=1e-5) for name in plain)
    lines = dict(line.split(": ", 1) for line in plan(compose_config(
        *_overrides(tiny_lm, tmp_path / "plan", "activation_checkpointing=true"))))  # fmt: skip
    assert "activations checkpointed" in lines["memory"]
    with pytest.raises(RunRefused, match="activation_checkpointing=true saves memory while training; method=shortgpt"):
        run(compose_config(*_overrides(tiny_lm, tmp_path / "c", "method=shortgpt", "activation_checkpointing=true")))


def test_fsdp_where_lightning_refuses_it_is_refused_before_any_compute(tiny_lm, tmp_path):
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(tiny_lm, tmp_path, "trainer.strategy=fsdp", "trainer.devices=2")))
    [problem] = [p for p in refused.value.problems if "Lightning refuses" in p]
    assert problem.startswith(
        "Lightning refuses the trainer settings (trainer.accelerator=cpu, trainer.strategy=fsdp, trainer.devices=2): "
        "The strategy `fsdp` requires a GPU accelerator"
    )
    assert "Fix: a strategy Lightning offers on this accelerator" in problem
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache" / "tokenized").exists()


def test_bf16_on_a_cpu_whose_torch_build_cannot_autocast_is_refused_before_any_compute(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setattr(trainer_checks, "cpu_bf16_problem", lambda: "RuntimeError: no bf16 kernels")
    assert device_problems(compose_config(*_overrides(tiny_lm, tmp_path, "trainer.precision=bf16-mixed"))) == [
        "trainer.precision=bf16-mixed trains under bf16 autocast on this CPU, which this torch build cannot do "
        "(RuntimeError: no bf16 kernels). Fix: trainer.precision=32-true."
    ]
    assert device_problems(compose_config(*_overrides(tiny_lm, tmp_path, "trainer.precision=32-true"))) == []
    assert not (tmp_path / "cache").exists()  # auto was not measured by the check


@pytest.fixture
def tiny_bpe_lm(tmp_path):
    """A tiny Llama with a byte-level BPE tokenizer (the kind a GGUF file carries), and the texts of ``tiny_lm``."""
    folder = tmp_path / "tiny_bpe_llama"
    tokenizer = tiny_bpe_tokenizer()
    tiny_decoder("llama", vocab_size=len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, _texts(tmp_path / "bpe_texts")


def test_a_language_model_run_ships_its_successor_as_gguf_files_checked_against_pytorch(tiny_bpe_lm, tmp_path):
    run(compose_config(*_overrides(tiny_bpe_lm, tmp_path, "deploy.gguf=[f16,q8_0]", "deploy.llama_cpp=false")))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    rows = {row["type"]: row for row in written["gguf"]}
    assert list(rows) == ["f16", "q8_0"] and "gguf" not in written["failed_steps"]
    successor = tmp_path / "run" / "successor"
    for kind, row in rows.items():
        assert row["file"] == f"gguf/model.{kind}.gguf" and (successor / row["file"]).is_file()
        assert row["agreement"] >= row["agreement_floor"] and row["llama_cpp"] is None
    assert rows["q8_0"]["mib"] < rows["f16"]["mib"]
    card = (successor / "README.md").read_text()
    assert "## GGUF files for llama.cpp" in card and "| `gguf/model.q8_0.gguf` | q8_0 |" in card
    summary = read_run(tmp_path / "run" / "results.json").summary()  # the W&B run's final numbers
    assert summary["final/gguf_q8_0_mib"] == rows["q8_0"]["mib"] and "final/gguf_f16_agreement" in summary


def test_gguf_files_that_cannot_be_made_or_timed_are_refused_before_any_compute(tiny_lm, tiny_bpe_lm, tmp_path,
                                                                                 monkeypatch):  # fmt: skip
    with pytest.raises(RunRefused) as word_level:  # no tokenizer llama.cpp reads: refused when the file is written
        run(compose_config(*_overrides(tiny_lm, tmp_path / "a", "deploy.gguf=[f16]", "deploy.llama_cpp=false")))
    (problem,) = word_level.value.problems
    assert problem.startswith("deploy.gguf=[f16]: the tokenizer of") and "model.gguf=FILE" in problem

    with pytest.raises(RunRefused) as unknown_type:
        run(compose_config(*_overrides(tiny_bpe_lm, tmp_path / "c", "deploy.gguf=[q3_k]")))
    (problem,) = unknown_type.value.problems
    assert problem.startswith("deploy.gguf=['q3_k'] must be a list of distinct GGUF types, e.g. [f16,q8_0], from f32")

    scaled = tmp_path / "scaled_rope"  # Llama 3.1's RoPE, which the writer would give llama.cpp unscaled
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}  # fmt: skip
    tiny_decoder("llama", vocab_size=300, rope_parameters=rope).save_pretrained(scaled)
    tiny_bpe_tokenizer().save_pretrained(scaled)
    with pytest.raises(RunRefused) as scaled_rope:
        run(compose_config(*_overrides((scaled, tiny_bpe_lm[1]), tmp_path / "d", "deploy.gguf=[f16]",
                                       "deploy.llama_cpp=false")))  # fmt: skip
    (problem,) = scaled_rope.value.problems
    assert problem == (f"deploy.gguf=[f16]: {scaled}: its RoPE is scaled (llama3), which this GGUF writer does not "
                       "write (llama.cpp would run it unscaled): llama.cpp's convert_hf_to_gguf.py writes its "
                       "frequency factors.")  # fmt: skip

    monkeypatch.setattr(language_model_checks, "llama_cpp_problem", lambda: "llama-cpp-python is not installed")
    qwen = tmp_path / "qwen"
    tiny_decoder("qwen2", vocab_size=300).save_pretrained(qwen)
    tiny_bpe_tokenizer().save_pretrained(qwen)
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides((qwen, tiny_bpe_lm[1]), tmp_path / "b", "deploy.gguf=[f16]",
                                       "deploy.llama_cpp=true")))  # fmt: skip
    assert refused.value.problems == [
        "GGUF export knows the llama family, not 'qwen2' (llama.cpp's convert_hf_to_gguf.py writes the others).",
        "deploy.llama_cpp=true: llama-cpp-python is not installed",
    ]
    assert not (tmp_path / "b" / "run" / "results.json").exists()


def test_a_finished_lm_run_is_shipped_as_gguf_from_the_command_line(tiny_bpe_lm, tmp_path, capsys, monkeypatch):
    run_dir = _finished_run(tiny_bpe_lm, tmp_path)
    assert deploy_main([str(run_dir), "--gguf", "q8_0", "--llama-cpp", "false", "--dry-run"]) is None
    plan = capsys.readouterr().out
    assert f"write {run_dir / 'successor' / 'gguf' / 'model.q8_0.gguf'}" in plan and "not time them" in plan
    assert not (run_dir / "successor" / "gguf").exists()

    (row,) = deploy_main([str(run_dir), "--gguf", "q8_0", "--llama-cpp", "false"])
    assert row["type"] == "q8_0" and (run_dir / "successor" / row["file"]).is_file()
    assert read_run(run_dir / "results.json").gguf == [row]
    assert "| `gguf/model.q8_0.gguf` | q8_0 |" in (run_dir / "successor" / "README.md").read_text()
    mine = run_dir / "successor" / "gguf" / "model.q4_k_m.gguf"  # made by llama-quantize: it was deleted
    mine.write_bytes(b"a k-quant of the user's")
    deploy_main([str(run_dir), "--gguf", "f16", "--llama-cpp", "false", "--dry-run"])
    plan = capsys.readouterr().out
    assert f"remove an earlier deployment's {run_dir / 'successor' / 'gguf' / 'model.q8_0.gguf'}\n" in plan
    deploy_main([str(run_dir), "--gguf", "f16", "--llama-cpp", "false"])  # publish uploads the folder: f16 alone
    assert sorted(path.name for path in mine.parent.iterdir()) == ["model.f16.gguf", mine.name]
    mine.unlink()

    def failing_export(*_):
        raise RuntimeError("the converter broke")

    monkeypatch.setattr(gguf_stage, "export_gguf", failing_export)  # after the f16 file was cleared
    with pytest.raises(SystemExit, match="the converter broke"):
        deploy_main([str(run_dir), "--gguf", "q8_0", "--llama-cpp", "false"])
    failed = read_run(run_dir / "results.json")
    assert failed.gguf is None and failed.failed_steps == {"gguf": "RuntimeError: the converter broke"}
    assert "model.f16.gguf" not in (run_dir / "successor" / "README.md").read_text()
    monkeypatch.undo()
    with pytest.raises(SystemExit, match=r"^--gguf q3_k must be distinct GGUF types, e\.g\. f16 q8_0, from f32, "):
        deploy_main([str(run_dir), "--gguf", "q3_k"])  # named as typed, not as the run's setting
    with pytest.raises(SystemExit, match=r"^--gguf f16 q8_0 f16 must be distinct GGUF types"):
        deploy_main([str(run_dir), "--gguf", "f16", "q8_0", "f16"])  # f16 written twice, listed twice in the record
    # a folder missing what the run wrote: FileNotFoundError's and OSError's tracebacks, now one line each
    (run_dir / "successor" / "config.json").rename(run_dir / "successor" / "config.json.away")
    with pytest.raises(SystemExit, match=r"successor holds no config\.json: the run's successor is not there"):
        deploy_main([str(run_dir), "--gguf", "f16", "--dry-run"])
    (run_dir / ".hydra" / "config.yaml").rename(run_dir / "config.yaml")  # where a copy from W&B's files has it
    with pytest.raises(SystemExit, match=r"has no \.hydra/config\.yaml, so the held-out text the GGUF files are"):
        deploy_main([str(run_dir), "--gguf", "f16"])


def test_a_run_saved_before_a_setting_existed_deploys_with_that_settings_value_from_its_own_overrides(
    tiny_bpe_lm, tmp_path
):
    run_dir = _finished_run(tiny_bpe_lm, tmp_path)
    saved = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    OmegaConf.save(_overrides(tiny_bpe_lm, tmp_path, "method=shortgpt"), run_dir / ".hydra" / "overrides.yaml")
    del saved.data["window"]  # as if the run predated data.window: its overrides set it to 8
    OmegaConf.save(saved, run_dir / ".hydra" / "config.yaml")
    (row,) = deploy_main([str(run_dir), "--gguf", "f16", "--llama-cpp", "false"])
    assert row["agreement"] == 1.0  # checked on the run's own 8-token held-out windows


@pytest.mark.slow
def test_a_two_process_cpu_ddp_lm_run_trains_each_rank_on_its_share_and_reports_once(tiny_lm, tmp_path):
    folder = tmp_path / "ddp"
    overrides = [o for o in _overrides(tiny_lm, tmp_path, "logger=default") if not o.startswith("paths.output_dir")]
    seed_machine_bf16(tmp_path / "cache")  # rank 1's process starts knowing it
    completed = app(
        *overrides, "data.batch_size=2", "trainer.strategy=ddp_find_unused_parameters_true", "trainer.devices=2",
        f"hydra.run.dir={folder}", cwd=tmp_path,
    )  # fmt: skip
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "Rank 1 is done; rank 0 evaluates, exports and writes the results." in output
    written_files = [p.relative_to(tmp_path) for p in tmp_path.rglob("results.json") if "wandb" not in p.parts]
    assert written_files == [Path("ddp/results.json")]  # (and its copy in rank 0's W&B run)
    written = json.loads((folder / "results.json").read_text())
    # 6 steps of 2 windows on each of 2 processes: the one-process run's budget at data.batch_size=4
    assert written["steps"] == 6 and written["data"]["train_tokens"] == 6 * 2 * 2 * 8
    assert len(list(tmp_path.rglob("offline-run-*"))) == 1  # one W&B run, rank 0's
    assert AutoModelForCausalLM.from_pretrained(folder / "successor").config.num_hidden_layers == 2


def test_gpus_a_machine_does_not_have_are_refused_before_any_compute(tiny_lm, tmp_path, monkeypatch):
    with pytest.raises(RunRefused) as no_gpu:
        run(compose_config(*_overrides(tiny_lm, tmp_path, "trainer=gpu")))
    assert [p for p in no_gpu.value.problems if "CUDA" in p] == [
        "trainer.accelerator=gpu (trainer=gpu, trainer=ddp) needs a CUDA GPU, and torch sees none on this machine. "
        "Fix: trainer=cpu, or trainer=default (a GPU when there is one, else the CPU)."
    ]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what the check sees on a machine with one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert device_problems(compose_config(*_overrides(tiny_lm, tmp_path, "trainer=gpu", "trainer.devices=4"))) == [
        "trainer.devices=4 asks for more GPUs than the 1 torch sees on this machine. Fix: trainer.devices=1 (or -1: "
        "every GPU)."
    ]
