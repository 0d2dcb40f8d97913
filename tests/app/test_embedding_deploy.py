"""A finished sentence-embedding run deployed to ONNX Runtime and OpenVINO: its encoder written where
sentence-transformers' backends look for it, its vectors checked against PyTorch's, every model scored on STS-B dev as
sentence-transformers scores the PyTorch successor, OpenVINO's int8 calibrated on training sentences only, and a
model card whose snippets run."""

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest
import torch
from app_runs import compose_config
from embedding_models import make_sentence_glue_dir, save_tiny_embedding_model
from omegaconf import OmegaConf
from sentence_transformers import SentenceTransformer
from sentence_transformers.backend.utils import backend_should_export

from theseus_pl.app.kinds.embedding_model.run import sts_dev_pairs, training_sentences, training_text
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import run, untrained_deployment
from theseus_pl.deploy import main
from theseus_pl.deployment import onnx_export, openvino_export


@pytest.fixture(scope="module")
def embedding_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 4 -> 2 layer run of a tiny sentence-transformers model (truncation: no training needed here)."""
    root = tmp_path_factory.mktemp("embedding_deploy")
    model = save_tiny_embedding_model(root / "model", normalize=True)
    glue = make_sentence_glue_dir(root / "glue")
    cfg = compose_config(
        "+experiment=minilm_embedding_quick", f"model.base={model}", "model.hub_id=null", f"data.glue_dir={glue}",
        "data.max_sentences=null", "data.held_out=8", "theseus.successor_layers=2", "method=embedding_truncation",
        "logger=csv", "benchmark.repeats=0", f"paths.cache_dir={root / 'cache'}", f"paths.output_dir={root / 'run'}",
    )  # fmt: skip
    run(cfg)
    (root / "run" / ".hydra").mkdir()
    OmegaConf.save(cfg, root / "run" / ".hydra" / "config.yaml")  # as the app's Hydra writes it
    return root / "run"


def test_the_dry_run_says_what_it_would_write_and_writes_nothing(embedding_run, capsys, tmp_path):
    assert main([str(embedding_run), "--dry-run"]) is None
    printed = capsys.readouterr().out
    assert (
        f"export the encoder of {embedding_run / 'successor'}: {embedding_run / 'successor/onnx/model.onnx'}" in printed
    )
    assert "score each model on the run's 12 STS-B dev pairs" in printed
    assert main([str(embedding_run), "--dry-run", "--threads", "1"]) is None
    assert "20 calls each, on 1 thread, beside the predecessor" in capsys.readouterr().out
    assert main([str(embedding_run), "--openvino", "--dry-run"]) is None
    assert (
        f"{embedding_run / 'successor/openvino/openvino_model.xml'}, "
        f"{embedding_run / 'successor/openvino/openvino_model_qint8_quantized.xml'} (an earlier deployment's files in "
        "onnx/ and openvino/ removed first, others kept; sentence-transformers' backend='onnx' and 'openvino' looks "
        "there)"
    ) in (printed := capsys.readouterr().out)
    # int8 calibrated on every training sentence, fewer than the 300 asked, as the deployment would
    data = OmegaConf.load(embedding_run / ".hydra" / "config.yaml").data
    sentences = len(training_sentences(data, sts_dev_pairs(data)))
    assert 0 < sentences < 300
    assert f"calibrated on {sentences} training sentences (a fixed draw, never dev rows; all there are, of the 300" in (
        printed
    )
    # and the dev pairs read where --glue-dir says, refused there before anything is done
    with pytest.raises(SystemExit, match=f"--glue-dir {tmp_path / 'moved'} is not a folder"):
        main([str(embedding_run), "--dry-run", "--glue-dir", str(tmp_path / "moved")])
    assert not (embedding_run / "successor" / "onnx").exists()
    assert not (embedding_run / "successor" / "openvino").exists()


def test_a_run_without_its_config_is_told_to_put_it_back_not_to_deploy_its_successor_with_task(embedding_run, tmp_path):
    """It was told a classifier's fix, "deploy its successor/ with --task", which refuses a sentence-embedding
    successor (no classifier): its STS-B dev pairs are its config's, so the config goes back."""
    run_dir = shutil.copytree(embedding_run, tmp_path / "run")
    shutil.rmtree(run_dir / ".hydra")
    record = (run_dir / "results.json").read_bytes()
    for dry_run in [[], ["--dry-run"]]:
        with pytest.raises(SystemExit) as refused:
            main([str(run_dir), *dry_run])
        assert str(refused.value) == (
            f"{run_dir} has no .hydra/config.yaml, so its dev set is unknown: put the run's .hydra/config.yaml back "
            "and deploy its folder again: a sentence-embedding successor deploys from its run's folder only, whose "
            "config names the STS-B dev pairs and training sentences."
        )
    # and so are its successor given alone (no classifier: it does not deploy as a checkpoint with --task) and the
    # folder given --task, which a task model's folder is told to give its successor
    successor, task = str(run_dir / "successor"), ["--task", "STS-B"]
    for command in ([successor], [successor, *task], [str(run_dir), *task]):
        with pytest.raises(SystemExit) as refused:
            main([*command, "--dry-run"])
        assert str(refused.value).startswith(f"{run_dir} has no .hydra/config.yaml, so its dev set is unknown: put")
    assert (run_dir / "results.json").read_bytes() == record and not (run_dir / "successor" / "onnx").exists()


def test_the_encoder_ships_checked_scored_and_timed_and_the_cards_snippet_runs(embedding_run):
    block = main([str(embedding_run), "--repeats", "2", "--target", "onnx_fp32", "--sequence-length", "0"])
    successor_dir = embedding_run / "successor"
    assert sorted(path.name for path in (successor_dir / "onnx").iterdir()) == ["model.onnx", "model_int8.onnx"]
    results = read_run(embedding_run / "results.json")
    assert results.deployment == block  # written into the run's record, read back whole
    assert json.loads((embedding_run / "results.json").read_text())["deployment"]["onnx"] == "onnx/model.onnx"
    # sentence-transformers' ONNX backend finds both without exporting (its own lookup; loading needs Optimum's ONNX
    # package, which pins transformers 4): the fp32 graph by default (optimum's ONNX_WEIGHTS_NAME), int8 by its name.
    for kwargs in ({}, {"file_name": "model_int8.onnx"}):
        export, found = backend_should_export(successor_dir, True, kwargs, "model.onnx", "*.onnx", "ONNX")
        assert not export and found["subfolder"] == "onnx"

    assert block.max_abs_diff <= block.tolerance and block.checked_on == "24 STS-B dev sentences"
    scores = block.dev_score
    assert set(scores) == {"pytorch_successor", "onnx_fp32", "onnx_int8"}
    assert scores["pytorch_successor"] == pytest.approx(results.successor.sts, abs=1e-6)  # sentence-transformers' own
    # A random tiny model's cosines nearly tie: vectors within 1e-4 may swap two of the 12 pairs' ranks (0.7 a swap).
    assert scores["onnx_fp32"] == pytest.approx(results.successor.sts, abs=1.5)
    assert list(block.latency_ms) == ["batch_1", "batch_32", "batch_1_own_lengths", "batch_32_own_lengths"]
    assert set(block.latency_ms["batch_1"]) == {"pytorch_predecessor", "pytorch_successor", "onnx_fp32", "onnx_int8"}
    assert block.target == "onnx_fp32" and block.settings.sequence_length is None

    card = (successor_dir / "README.md").read_text()
    assert "## Deployment" in card and "STS-B dev Spearman (x100)" in card
    snippet = card.split("With ONNX Runtime alone")[1].split("```python\n")[1].split("```")[0]
    namespace: dict = {}
    exec(snippet.replace("<this folder>", str(successor_dir)), namespace)  # the card's own lines, as a user runs them
    expected = SentenceTransformer(str(successor_dir), device="cpu").encode(
        ["A man is playing a guitar.", "Someone plays an instrument."], convert_to_tensor=True
    )
    assert torch.allclose(namespace["embeddings"], expected, atol=1e-4)


def test_a_run_asked_to_deploy_ships_its_encoder_as_it_ends_as_the_deploy_command_would(embedding_run, tmp_path):
    """``deploy.onnx=true`` on the run itself (a search's trials ask it): the encoder exported, scored on the run's
    STS-B dev pairs and timed on their own lengths before the card is written, with no second command."""
    root = embedding_run.parent
    cfg = compose_config(
        "+experiment=minilm_embedding_quick", f"model.base={root / 'model'}", "model.hub_id=null",
        f"data.glue_dir={root / 'glue'}", "data.max_sentences=null", "data.held_out=8", "theseus.successor_layers=2",
        "method=embedding_truncation", "logger=csv", "benchmark.repeats=0", "deploy.onnx=true", "deploy.quantize=int8",
        "deploy.openvino=false", "deploy.repeats=2", f"paths.cache_dir={root / 'cache'}",
        f"paths.output_dir={tmp_path / 'run'}",
    )  # fmt: skip
    run(cfg)
    results = read_run(tmp_path / "run" / "results.json")
    block = results.deployment
    assert results.failed_steps == {} and block is not None
    assert set(block.dev_score) == {"pytorch_successor", "onnx_fp32", "onnx_int8"}
    assert block.checked_on == "24 STS-B dev sentences" and "batch_1_own_lengths" in block.latency_ms
    assert block.target in block.dev_score
    assert (tmp_path / "run" / "successor" / "onnx" / "model_int8.onnx").is_file()
    assert "## Deployment" in (tmp_path / "run" / "successor" / "README.md").read_text()


def test_an_untrained_successor_is_deployed_and_timed_as_a_trial_of_its_shape_would_be(embedding_run, tmp_path):
    """What a search's latency target weighs each shape by before any training: the successor its method starts
    from, deployed as the run would deploy it, nothing trained and no run folder written."""
    root = embedding_run.parent
    cfg = compose_config(
        "+experiment=minilm_embedding_quick", f"model.base={root / 'model'}", "model.hub_id=null",
        f"data.glue_dir={root / 'glue'}", "data.max_sentences=null", "data.held_out=8", "theseus.successor_layers=1",
        "method=embedding_theseus", "deploy.onnx=true", "deploy.quantize=int8", "deploy.openvino=false",
        "deploy.repeats=2", f"paths.cache_dir={root / 'cache'}", f"paths.output_dir={tmp_path / 'run'}",
    )  # fmt: skip
    block = untrained_deployment(cfg)
    assert set(block.dev_score) == {"pytorch_successor", "onnx_fp32", "onnx_int8"}
    assert {"onnx_fp32", "onnx_int8"} <= set(block.latency_ms["batch_1_own_lengths"])
    assert not (tmp_path / "run").exists() and not list((root / "cache").glob("theseus-pl-untrained-*"))


def test_openvino_ships_where_sentence_transformers_looks_calibrated_on_training_sentences_only(
    embedding_run, monkeypatch
):
    calibrated: list[dict] = []
    quantize = openvino_export.quantize_openvino

    def recorded(graph, int8, batches):
        calibrated.extend(batches)
        return quantize(graph, int8, batches)

    monkeypatch.setattr(openvino_export, "quantize_openvino", recorded)
    config = embedding_run / ".hydra" / "config.yaml"
    saved = OmegaConf.load(config)
    del saved.data["corpora"]  # as a run folder written before data.corpora existed has it
    OmegaConf.save(saved, config)
    block = main([str(embedding_run), "--openvino", "--calibration-rows", "5", "--repeats", "2",
                  "--target", "openvino_fp32"])  # fmt: skip
    successor_dir = embedding_run / "successor"

    assert (block.openvino, block.openvino_int8) == (
        "openvino/openvino_model.xml", "openvino/openvino_model_qint8_quantized.xml"
    )  # fmt: skip
    for graph in (block.openvino, block.openvino_int8):
        assert (successor_dir / graph).with_suffix(".bin").is_file()
    # sentence-transformers' OpenVINO backend finds both without exporting (its own lookup; loading needs Optimum
    # Intel, which pins transformers < 5.6): the fp32 graph by default, the int8 one by its file name.
    for kwargs in ({}, {"file_name": "openvino_model_qint8_quantized.xml"}):
        export, found = backend_should_export(successor_dir, True, kwargs, "openvino_model.xml", "openvino*.xml",
                                              "OpenVINO")  # fmt: skip
        assert not export and found["subfolder"] == "openvino"

    cfg = OmegaConf.load(embedding_run / ".hydra" / "config.yaml")
    pairs = sts_dev_pairs(cfg.data)
    training = training_text(cfg.data, pairs)[0]
    tokenizer = SentenceTransformer(str(successor_dir), device="cpu").tokenizer
    assert [batch["input_ids"].tolist() for batch in calibrated] == [
        [tokenizer(text)["input_ids"]] for text in training[:5]
    ]  # each its own batch, unpadded: the run's first training sentences
    assert not set(training) & {*pairs["sentence1"], *pairs["sentence2"]}  # never a dev sentence
    assert block.calibration == "static int8 by NNCF (transformer preset), calibrated on 5 training rows"

    assert block.max_abs_diff <= block.tolerance
    assert {"openvino_fp32", "openvino_int8"} <= set(block.dev_score)
    for times in block.latency_ms.values():
        assert {"openvino_fp32", "openvino_int8"} <= set(times)
    assert block.target == "openvino_fp32" and {"openvino", "nncf"} <= set(block.versions)

    card = (successor_dir / "README.md").read_text()
    assert "| OpenVINO fp32 (`openvino/openvino_model.xml`) |" in card
    assert 'model = SentenceTransformer("<this folder>", backend="openvino")' in card
    snippet = card.split("With OpenVINO alone")[1].split("```python\n")[1].split("```")[0]
    namespace: dict = {}
    exec(snippet.replace("<this folder>", str(successor_dir)), namespace)  # the card's own lines, as a user runs them
    expected = SentenceTransformer(str(successor_dir), device="cpu").encode(
        ["A man is playing a guitar.", "Someone plays an instrument."], convert_to_tensor=True
    )
    assert torch.allclose(namespace["embeddings"], expected, atol=1e-4)


def test_a_deploy_without_openvino_leaves_no_earlier_openvino_model_beside_its_block(embedding_run):
    main([str(embedding_run), "--openvino", "--quantize", "none", "--repeats", "1", "--batch-sizes", "1",
          "--no-own-lengths"])  # fmt: skip
    assert (embedding_run / "successor" / "openvino" / "openvino_model.xml").is_file()
    block = main([str(embedding_run), "--no-openvino", "--repeats", "1", "--batch-sizes", "1", "--no-own-lengths"])
    assert block.openvino is None and not (embedding_run / "successor" / "openvino").exists()
    assert sorted(path.name for path in (embedding_run / "successor" / "onnx").iterdir()) == [
        "model.onnx", "model_int8.onnx"
    ]  # fmt: skip


def test_a_failed_re_deploy_drops_the_block_describing_the_files_it_emptied(embedding_run, monkeypatch):
    quick = ["--no-openvino", "--repeats", "1", "--batch-sizes", "1", "--no-own-lengths"]
    main([str(embedding_run), *quick])

    def failing_quantisation(*_):
        raise RuntimeError("the quantiser broke")

    # after the fp32 file was written anew: it is removed with the int8 one the block named (it was left, unchecked,
    # with no block to describe it, and publish sent it)
    monkeypatch.setattr(onnx_export, "quantize_int8", failing_quantisation)
    with pytest.raises(SystemExit, match="the quantiser broke"):
        main([str(embedding_run), *quick])
    assert not (embedding_run / "successor" / "onnx").exists()
    failed = read_run(embedding_run / "results.json")  # it described the deleted int8 file, and publish sent it
    assert failed.deployment is None and failed.failed_steps == {"deployment": "RuntimeError: the quantiser broke"}
    assert "onnx/model_int8.onnx" not in (embedding_run / "successor" / "README.md").read_text()
    monkeypatch.undo()
    assert main([str(embedding_run), *quick]) == read_run(embedding_run / "results.json").deployment
    assert read_run(embedding_run / "results.json").failed_steps == {}


def test_model2vec_distils_the_predecessor_once_scored_and_timed_as_the_trials_are(
    embedding_run, tmp_path, monkeypatch, caplog
):
    """A sentence-embedding search's reference point: the run's predecessor distilled by model2vec into the cache,
    scored on the run's STS-B dev pairs, timed one sentence a call; the second call loads it from the cache. A model
    whose static vectors do not vary (no word in its listed vocabulary) scores no number and is left off."""
    import shutil
    from dataclasses import replace

    import model2vec.distill
    from embedding_models import with_a_listed_vocabulary

    from theseus_pl.app.kinds.embedding_model.static_reference import LABEL, static_reference
    from theseus_pl.app.results.envelope import write_results
    from theseus_pl.deployment.onnx_deployment import own_length_groups

    trial = shutil.copytree(embedding_run, tmp_path / "trial")
    record = read_run(trial / "results.json")
    predecessor = with_a_listed_vocabulary(Path(record.predecessor.dir), tmp_path / "predecessor")
    write_results(
        trial / "results.json", replace(record, predecessor=replace(record.predecessor, dir=str(predecessor)))
    )
    (point,) = static_reference(trial, 1, tmp_path / "cache")
    assert point.label == LABEL and -100 <= point.score <= 100 and point.latency_ms > 0
    assert len(list((tmp_path / "cache" / "model2vec").glob("predecessor-*"))) == 1  # beside its build lock

    def no_distillation(**settings):
        raise AssertionError("distilled again")

    monkeypatch.setattr(model2vec.distill, "distill", no_distillation)
    assert static_reference(trial, 32, tmp_path / "cache")[0].score == pytest.approx(point.score)
    assert own_length_groups(["aaa", "a", "aa"], 1, len) == [["aaa"], ["a"], ["aa"]]  # as the trials' rows
    assert own_length_groups(["aaa", "a", "aa", "aaaa"], 2, len) == [["a", "aa"], ["aaa", "aaaa"]]  # sorted, then cut
    monkeypatch.undo()
    unknown = shutil.copytree(embedding_run, tmp_path / "unknown_words")
    no_words = with_a_listed_vocabulary(Path(record.predecessor.dir), tmp_path / "no_words", words=[])
    write_results(unknown / "results.json", replace(record, predecessor=replace(record.predecessor, dir=str(no_words))))
    with caplog.at_level(logging.WARNING):
        assert static_reference(unknown, 1, tmp_path / "cache") == []  # no word of the dev pairs in its vocabulary
        assert "scored no number on the STS-B dev pairs" in caplog.text
        monkeypatch.setitem(sys.modules, "model2vec", None)  # not installed: no point, and the search goes on
        assert static_reference(trial, 1, tmp_path / "cache") == []
        assert "pip install 'theseus_pl[search]'" in caplog.text
