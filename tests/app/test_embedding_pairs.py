"""A sentence-embedding run on labelled pairs (``data=sentence_pairs``): every method trains on STS-B's training pairs
with sentence-transformers' own CoSENT loss, chooses its checkpoint on held-out training pairs' Spearman, writes a
folder sentence-transformers loads, and never trains on a held-out pair or a pair holding a dev sentence."""

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from app_runs import compose_config
from embedding_models import HIDDEN, make_sentence_glue_dir, save_tiny_embedding_model
from omegaconf import OmegaConf
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import CoSENTLoss

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.settings import checked_settings
from theseus_pl.app.kinds.embedding_model.record import PAIRS_LOSS
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import plan, run, run_kind
from theseus_pl.core.embeddings import embedding_encoder, pair_spearman, sentence_head
from theseus_pl.core.sentence_objective import SentenceObjective
from theseus_pl.data.sentence_pairs import Pairs, glue_pairs, held_out_pairs
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task
from theseus_pl.deploy import main as deploy
from theseus_pl.deployment import openvino_export
from theseus_pl.lightning.embedding_metrics import PairScoreMetrics

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("embedding_pairs")
    return save_tiny_embedding_model(root / "model", normalize=True), make_sentence_glue_dir(root / "glue")


def _overrides(pair_files: tuple[Path, Path], tmp_path: Path, *more: str) -> list[str]:
    model, glue = pair_files
    return [
        "+experiment=minilm_embedding_pairs", f"model.base={model}", "model.hub_id=null", f"data.glue_dir={glue}",
        "data.held_out=8", "data.batch_size=8", "theseus.successor_layers=2", "theseus.init=every_other",
        "schedule_steps=3", "trainer.max_steps=6", "trainer.val_check_interval=2", "logger=csv", "benchmark.repeats=1",
        "optimizer.lr=1e-3", f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'run'}", *more,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "steps"), [("embedding_theseus", 6), ("embedding_fine_tuning", 6), ("embedding_truncation", 0)]
)
def test_every_method_on_pairs_writes_a_folder_sentence_transformers_loads(pair_files, tmp_path, method, steps):
    results = run(compose_config(*_overrides(pair_files, tmp_path, f"method={method}")))
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert read_run(tmp_path / "run" / "results.json") == results
    data = written["data"]
    assert (data["loss"], data["train_pairs"]) == (PAIRS_LOSS, 22)  # 30 training pairs, 8 held out
    assert written["steps"] == steps and data["train_sentences_seen"] == steps * 8  # 4 pairs: 8 sentences a step
    successor = SentenceTransformer(str(tmp_path / "run" / "successor"), device="cpu")
    assert successor.encode(["the cat sat"], convert_to_tensor=True).shape == (1, HIDDEN)
    assert successor[0].auto_model.config.num_hidden_layers == 2
    card = (tmp_path / "run" / "successor" / "README.md").read_text()
    if steps:
        assert f"on {PAIRS_LOSS}, over 22 training pairs" in card
        assert written["best_step"] in (2, 4, 6) and "the best Spearman on held-out training pairs" in card


def test_the_loss_is_sentence_transformers_cosent_on_each_pair_and_validation_the_pairs_spearman(pair_files):
    model = SentenceTransformer(str(pair_files[0]), device="cpu")
    first, second = ["the cat sat", "a dog said hi", "he is good"], ["the cat sat on a mat", "hi", "he is not good"]
    scores = torch.tensor([4.0, 1.0, 2.5])
    batch = dict(model.tokenizer([*first, *second], padding=True, return_tensors="pt"))
    features = [dict(model.tokenizer(texts, padding=True, return_tensors="pt")) for texts in (first, second)]
    with torch.no_grad():
        ours = SentenceObjective(embedding_encoder(model), sentence_head(model))(labels=scores, **batch)
        assert float(ours.loss) == pytest.approx(float(CoSENTLoss(model)(features, scores)), abs=1e-5)

    metric = PairScoreMetrics()
    metric.update(ours.logits, scores)
    half = len(first)
    expected = pair_spearman(ours.logits[:half], ours.logits[half:], scores.tolist())
    assert metric.compute()["score"] == pytest.approx(expected, abs=1e-9)


def test_held_out_pairs_and_pairs_with_a_dev_sentence_are_never_trained_on(pair_files, tmp_path):
    glue = tmp_path / "glue"
    shutil.copytree(pair_files[1], glue)
    dev = GlueDirSource(glue).read(glue_task("STS-B"), "validation")
    with (glue / "STS-B" / "train.tsv").open("a", encoding="utf-8") as train:
        train.write(f"0\tg\tf\ty\t1\tn\tn\t{dev['sentence1'][0]}\tthe cat\t3.000\n")  # a dev sentence in a pair
    cfg = compose_config(*_overrides(pair_files, tmp_path, f"data.glue_dir={glue}"))
    kind = run_kind(cfg, checked_settings(cfg))
    kind.check()
    kind.prepare_data()
    pairs = kind.datamodule.pairs
    train = set(zip(pairs["train"].first, pairs["train"].second, strict=True))
    held_out = set(zip(pairs["validation"].first, pairs["validation"].second, strict=True))
    assert len(train) == 22 and len(held_out) == 8 and not train & held_out  # the 31st pair dropped
    assert not {*pairs["train"].sentences, *pairs["validation"].sentences} & {*dev["sentence1"], *dev["sentence2"]}
    batch = next(iter(kind.datamodule.train_dataloader()))
    assert batch["input_ids"].shape[0] == 8 and batch["labels"].shape == (4,)  # 4 pairs: 8 sentences, 4 scores


def test_openvino_int8_of_a_pairs_run_calibrates_on_its_training_pairs_sentences(pair_files, tmp_path, monkeypatch):
    """A deployment calibrates on the run's own training sentences: on a pairs run it read a setting only the
    sentences data group has (a ConfigAttributeError after the run had finished)."""
    cfg = compose_config(*_overrides(pair_files, tmp_path, "method=embedding_truncation", "benchmark.repeats=0"))
    run(cfg)
    (tmp_path / "run" / ".hydra").mkdir()
    OmegaConf.save(cfg, tmp_path / "run" / ".hydra" / "config.yaml")  # as the app's Hydra writes it
    calibrated: list[dict] = []
    quantize = openvino_export.quantize_openvino
    monkeypatch.setattr(
        openvino_export,
        "quantize_openvino",
        lambda graph, int8, batches: quantize(graph, int8, calibrated.extend(batches) or batches),
    )
    block = deploy([str(tmp_path / "run"), "--openvino", "--calibration-rows", "6",
                    "--repeats", "1", "--batch-sizes", "1"])  # fmt: skip

    assert block.openvino_int8 and len(calibrated) == 6
    source = GlueDirSource(pair_files[1])
    dev = source.read(glue_task("STS-B"), "validation")
    pairs = glue_pairs(source, "STS-B", leaving_out={*dev["sentence1"], *dev["sentence2"]})
    trained, held_out = held_out_pairs(pairs, cfg.data.held_out, cfg.data.split_seed)
    tokenizer = SentenceTransformer(str(tmp_path / "run" / "successor"), device="cpu").tokenizer
    assert [batch["input_ids"].tolist() for batch in calibrated] == [
        [tokenizer(text)["input_ids"]] for text in trained.sentences[:6]
    ]  # the training pairs' sentences, never a held-out pair's own
    assert not set(trained.sentences[:6]) & set(held_out.sentences_not_in(trained))


def test_fidelity_is_measured_on_held_out_sentences_that_no_training_pair_holds():
    """Holding out a pair does not hold out its sentences: the card called all of them never trained on, and with the
    shipped experiment's split on STS-B 95 of the 991 were in training pairs."""
    held_out = Pairs(["a man sings", "a dog runs"], ["a woman sings", "a cat sleeps"], [3.0, 1.0])
    trained = Pairs(["a dog runs", "two men talk"], ["a man talks", "a woman sings"], [2.0, 4.0])
    assert held_out.sentences_not_in(trained) == ["a man sings", "a cat sleeps"]


def test_held_out_pairs_whose_every_sentence_is_trained_on_are_refused_before_training(pair_files, tmp_path):
    """Fidelity is measured on the held-out sentences no training pair holds: with none, it failed after training."""
    glue = tmp_path / "glue"
    shutil.copytree(pair_files[1], glue)
    train = glue / "STS-B" / "train.tsv"
    header = train.read_text(encoding="utf-8").splitlines()[0]
    sentences = ["a man sings", "a dog runs", "a cat sleeps"]
    rows = [f"{i}\tg\tf\ty\t{i}\tn\tn\t{sentences[i % 3]}\t{sentences[(i + 1) % 3]}\t{i % 5}.000" for i in range(30)]
    train.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(pair_files, tmp_path, f"data.glue_dir={glue}")))
    assert any(problem.startswith("data.held_out=8: every sentence of the held-out pairs is in a training pair")
               for problem in refused.value.problems), refused.value.problems  # fmt: skip
    assert not (tmp_path / "run").exists()


def test_an_epoch_of_pairs_counts_two_sentences_a_pair_for_the_validation_interval(pair_files, tmp_path):
    overrides = _overrides(pair_files, tmp_path, "data.batch_size=6", "trainer.check_val_every_n_epoch=1")
    with pytest.raises(RunRefused) as refused:  # 22 training pairs, 3 a batch
        run(compose_config(*overrides, "trainer.val_check_interval=9"))
    (problem,) = refused.value.problems
    assert "an epoch here is 8 batches (44 training sentences, 6 a batch)" in problem
    assert not (tmp_path / "run").exists()


def test_check_names_the_pairs_and_the_loss(pair_files, tmp_path):
    lines = plan(compose_config(*_overrides(pair_files, tmp_path, "check_steps=0")))
    assert re.fullmatch(r"data: the training pairs of STS-B \(GLUE, from the classic GLUE files; their gold scores the "
                        r"labels\): 22 training pairs \(at most 128 tokens a sentence\), 8 held out; scored on 12 "
                        r"STS-B dev pairs", lines[1])  # fmt: skip
    assert f"loss: {PAIRS_LOSS} (no soft targets)" in lines
    assert "training: 6 optimizer steps of 8 sentences (48 sentences, 1.1 passes)" in lines
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        ("method=embedding_mse", "method=embedding_mse trains the kept layers to the predecessor's sentence vectors; "
                                 "data.pairs=STS-B trains on gold scores: use method=embedding_fine_tuning"),
        ("data.pairs=SST-2", "data.pairs=SST-2: its rows are no sentence pairs with a similarity score; name STS-B"),
        ("data.held_out=30", "data.held_out=30 leaves no training pair of the 30 there are"),
        ("data.batch_size=7", "data.batch_size=7: a batch of pairs holds an even number of sentences (two a pair)."),
    ],
)  # fmt: skip
def test_what_a_pairs_run_cannot_use_is_refused_before_compute(pair_files, tmp_path, override, refusal):
    with pytest.raises(RunRefused) as refused:
        run(compose_config(*_overrides(pair_files, tmp_path, override)))
    assert any(problem.startswith(refusal) for problem in refused.value.problems), refused.value.problems
    assert not (tmp_path / "run").exists()


def test_fine_tuning_on_unlabelled_sentences_is_refused_naming_the_recipe(pair_files, tmp_path):
    model, glue = pair_files
    cfg = compose_config("+experiment=minilm_embedding_quick", "method=embedding_fine_tuning", f"model.base={model}",
                         f"data.glue_dir={glue}", f"paths.output_dir={tmp_path / 'run'}")  # fmt: skip
    with pytest.raises(RunRefused) as refused:
        run(cfg)
    assert "method=embedding_fine_tuning trains the kept layers on labelled pairs (data=sentence_pairs); on " \
           "unlabelled sentences the same student trained to the predecessor's vectors is method=embedding_mse." \
           in refused.value.problems  # fmt: skip
