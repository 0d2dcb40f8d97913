"""Sentence-embedding models: loading refuses what is no sentence-transformers model, a truncated successor is a
sentence-transformers folder that sentence-transformers loads as it is, and the two measures agree with independent
computations (scipy's Spearman, the vectors' own distances)."""

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from embedding_models import HIDDEN, LAYERS, save_tiny_bert, save_tiny_embedding_model
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Pooling

from theseus_pl.core.embeddings import (
    embedding_encoder,
    fidelity,
    load_embedding_model,
    pair_spearman,
    sts_spearman,
    truncated_embedding_model,
)
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import successor_source_layers

pytestmark = pytest.mark.quick

SENTENCES = ["the cat sat on the mat", "a dog", "he said hi", "the mat is not good", "good dog", "a bad cat sat"]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("embeddings")
    save_tiny_embedding_model(root / "mean")
    save_tiny_embedding_model(root / "normalised", normalize=True)
    return root


@pytest.mark.parametrize("normalize", [False, True], ids=["mean", "normalised"])
@pytest.mark.parametrize("choice", ["every_other", "bottom"])
def test_a_truncated_model_saved_loads_and_encodes_as_its_predecessor_does(models_dir, tmp_path, normalize, choice):
    predecessor = load_embedding_model(models_dir / ("normalised" if normalize else "mean"))
    kept = successor_source_layers(LAYERS, 2, choice)
    assert kept == ([0, 2] if choice == "every_other" else [0, 1])

    truncated_embedding_model(predecessor, kept).save(str(tmp_path / "successor"))
    successor = SentenceTransformer(str(tmp_path / "successor"), device="cpu")  # sentence-transformers alone

    assert [type(module) for module in successor] == [type(module) for module in predecessor]
    assert successor[1].get_config_dict() == predecessor[1].get_config_dict()  # the same pooling
    encoder = embedding_encoder(successor)
    assert encoder.config.num_hidden_layers == len(find_layer_stack(encoder).layers) == 2
    layers, before = find_layer_stack(encoder).layers, find_layer_stack(embedding_encoder(predecessor)).layers
    for layer, index in zip(layers, kept, strict=True):
        ours, theirs = layer.state_dict(), before[index].state_dict()
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[name], theirs[name]) for name in ours)

    vectors, reference = successor.encode(SENTENCES), predecessor.encode(SENTENCES)
    assert vectors.shape == reference.shape == (len(SENTENCES), HIDDEN)
    norms, reference_norms = torch.tensor(vectors).norm(dim=-1), torch.tensor(reference).norm(dim=-1)
    if normalize:
        assert torch.allclose(norms, torch.ones(len(SENTENCES)), atol=1e-5)
        assert torch.allclose(reference_norms, torch.ones(len(SENTENCES)), atol=1e-5)
    else:
        assert not torch.allclose(norms, torch.ones(len(SENTENCES)), atol=1e-2)


def test_truncating_leaves_the_predecessor_as_it_was(models_dir):
    predecessor = load_embedding_model(models_dir / "mean")
    reference = predecessor.encode(SENTENCES)
    successor = truncated_embedding_model(predecessor, [1])
    theirs = {parameter.data_ptr() for parameter in predecessor.parameters()}
    assert not any(parameter.data_ptr() in theirs for parameter in successor.parameters())  # a copy, shares nothing
    encoder = embedding_encoder(predecessor)
    assert encoder.config.num_hidden_layers == len(find_layer_stack(encoder).layers) == LAYERS
    assert (predecessor.encode(SENTENCES) == reference).all()


def test_truncating_refuses_layers_the_model_does_not_have(models_dir):
    with pytest.raises(ValueError, match=r"kept=\[0, 4\] must be ascending layer indices of the model's 4 layers"):
        truncated_embedding_model(load_embedding_model(models_dir / "mean"), [0, 4])


def test_a_plain_transformers_folder_is_refused_in_one_line(tmp_path):
    folder = save_tiny_bert(tmp_path / "plain")
    with pytest.raises(ValueError) as refused:
        load_embedding_model(folder)
    message = str(refused.value)
    assert message.startswith(f"path_or_id={str(folder)!r} is no sentence-transformers model: it has no modules.json")
    assert "give a sentence-transformers folder, or add pooling" in message
    assert "\n" not in message


def test_a_folder_whose_modules_have_no_pooling_is_refused_in_one_line(models_dir, tmp_path):
    folder = tmp_path / "no-pooling"
    SentenceTransformer(str(models_dir / "normalised"), device="cpu").save(str(folder))
    modules = json.loads((folder / "modules.json").read_text())
    (folder / "modules.json").write_text(json.dumps([m for m in modules if not m["type"].endswith(".Pooling")]))
    with pytest.raises(ValueError) as refused:
        load_embedding_model(folder)
    message = str(refused.value)
    assert message == (
        f"path_or_id={str(folder)!r} is no sentence-transformers model this library compresses: its modules.json "
        "lists no Pooling module (it lists Transformer, Normalize); give a sentence-transformers folder, or add "
        "pooling: SentenceTransformer(modules=[Transformer(folder), Pooling(hidden_size, 'mean')]).save(new_folder)."
    )


def test_a_missing_folder_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^path_or_id='[^']+/absent' is no folder here[^\n]+$"):
        load_embedding_model(tmp_path / "absent")


def test_a_model_without_a_transformer_first_has_no_encoder(models_dir):
    model = load_embedding_model(models_dir / "mean")
    pooling_only = SentenceTransformer(modules=[model[1]], device="cpu")
    refusal = r"^model: its first module is Pooling, not a sentence-transformers Transformer[^\n]+$"
    with pytest.raises(ValueError, match=refusal):
        embedding_encoder(pooling_only)


def test_sts_spearman_is_scipys_spearman_of_the_cosine_similarities_times_100(models_dir):
    model = load_embedding_model(models_dir / "mean")
    first = ["the cat", "a dog", "he said hi", "good", "the mat is not good", "a bad cat", "the dog sat", "hi"]
    second = ["the mat", "a bad dog", "hi", "bad", "the mat is good", "a cat", "he sat on the mat", "he said"]
    scores = [4.0, 2.5, 3.0, 0.5, 1.0, 3.5, 2.0, 5.0]
    cosines = F.cosine_similarity(
        torch.tensor(model.encode(first)), torch.tensor(model.encode(second)), dim=-1
    )  # computed apart from sentence-transformers' evaluator
    expected = 100 * spearmanr(scores, cosines.numpy()).statistic
    assert sts_spearman(model, first, second, scores) == pytest.approx(expected, abs=1e-9)
    with pytest.raises(ValueError, match="must be of one length"):
        sts_spearman(model, first, second[:-1], scores)
    vectors = [model.encode(texts, convert_to_tensor=True) for texts in (first, second)]  # as an export gives them
    assert pair_spearman(*vectors, scores) == sts_spearman(model, first, second, scores)


def test_fidelity_is_exact_against_itself_and_falls_for_a_truncated_model(models_dir):
    teacher = load_embedding_model(models_dir / "mean")
    same = fidelity(teacher, teacher, SENTENCES)
    assert same["mse"] == 0.0
    assert same["cosine"] == pytest.approx(1.0, abs=1e-6)

    student = truncated_embedding_model(teacher, [0, 2])
    apart = fidelity(student, teacher, SENTENCES, batch_size=4)
    ours, theirs = torch.tensor(student.encode(SENTENCES)), torch.tensor(teacher.encode(SENTENCES))
    assert apart["mse"] == pytest.approx(float(((ours - theirs) ** 2).mean()), rel=1e-5)
    assert apart["mse"] > 0
    assert apart["cosine"] < 1 - 1e-6


def test_fidelity_refuses_vectors_of_other_sizes(models_dir):
    teacher = load_embedding_model(models_dir / "mean")
    wider = SentenceTransformer(modules=[teacher[0], Pooling(HIDDEN, ["mean", "max"])], device="cpu")
    with pytest.raises(ValueError, match=r"^student and teacher embed in 64 and 32 dimensions[^\n]+$"):
        fidelity(wider, teacher, SENTENCES)


def test_without_sentence_transformers_the_import_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "theseus_pl.core.embeddings")  # restored afterwards
    with pytest.raises(ModuleNotFoundError, match=r"^Sentence-embedding models need sentence-transformers, not "):
        importlib.import_module("theseus_pl.core.embeddings")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'theseus_pl\[embeddings\]'\.$"):
        importlib.import_module("theseus_pl.core.embeddings")
