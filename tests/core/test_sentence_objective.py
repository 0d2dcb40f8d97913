"""A sentence model as something that trains: its vectors are sentence-transformers' own, the all-predecessor path of
its Theseus model is the predecessor, and training to the predecessor's vectors moves only the successor layers."""

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_inputs
from embedding_models import HIDDEN, save_tiny_embedding_model
from sentence_transformers import SentenceTransformer

from theseus_pl.core.embeddings import embedding_encoder, sentence_head, with_encoder
from theseus_pl.core.sentence_objective import SentenceObjective, TheseusSentenceModel

pytestmark = pytest.mark.quick

SENTENCES = ["the cat sat on the mat", "a dog", "he said hi", "the mat is not good"]


@pytest.fixture(scope="module")
def sentence_model(tmp_path_factory: pytest.TempPathFactory) -> SentenceTransformer:
    folder = save_tiny_embedding_model(tmp_path_factory.mktemp("objective") / "model", normalize=True)
    return SentenceTransformer(str(folder), device="cpu").eval()


def _predecessor_copy(sentence_model: SentenceTransformer) -> torch.nn.Module:
    """A copy of the encoder: a Theseus model takes its predecessor's layers over."""
    return copy.deepcopy(embedding_encoder(sentence_model)).eval()


def test_the_objectives_vectors_are_those_sentence_transformers_encodes(sentence_model):
    objective = SentenceObjective(embedding_encoder(sentence_model), sentence_head(sentence_model)).eval()
    batch = sentence_model.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        vectors = objective(**batch).logits
    expected = sentence_model.encode(SENTENCES, convert_to_tensor=True)
    assert vectors.shape == (len(SENTENCES), HIDDEN)
    assert torch.allclose(vectors, expected, atol=1e-5)


def test_the_loss_is_the_mean_squared_error_to_the_given_vectors(sentence_model):
    objective = SentenceObjective(embedding_encoder(sentence_model), sentence_head(sentence_model)).eval()
    batch = sentence_model.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    targets = torch.randn(len(SENTENCES), HIDDEN)
    with torch.no_grad():
        output = objective(**batch, labels=targets)
    assert output.loss == pytest.approx(float(F.mse_loss(output.logits, targets)), rel=1e-6)


def test_the_all_predecessor_path_gives_the_predecessors_vectors_and_the_compact_model_the_all_successor_ones(
    sentence_model,
):
    teacher = SentenceObjective(embedding_encoder(sentence_model), sentence_head(sentence_model)).eval()
    theseus = TheseusSentenceModel(_predecessor_copy(sentence_model), sentence_head(sentence_model), 2, "top").eval()
    batch = sentence_model.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = teacher(**batch).logits
        output = theseus([False, False], **batch, labels=expected)
        successors = theseus(None, **batch).logits
        compact = theseus.to_compact_model().eval()(**batch).logits
    assert torch.allclose(output.logits, expected, atol=1e-6) and float(output.loss) < 1e-10
    assert isinstance(theseus.to_compact_model(), SentenceObjective)
    assert torch.allclose(compact, successors, atol=1e-5)
    assert not torch.allclose(successors, expected, atol=1e-3)  # two layers of four: other vectors


def test_training_to_the_predecessors_vectors_moves_only_the_successor_layers(sentence_model):
    theseus = TheseusSentenceModel(_predecessor_copy(sentence_model), sentence_head(sentence_model), 2, "bottom")
    before = {name: p.detach().clone() for name, p in theseus.named_parameters()}
    optimizer = torch.optim.AdamW(theseus.successor_parameters(), lr=1e-2, weight_decay=0.1)
    batch = tiny_inputs() | {"labels": F.normalize(torch.randn(3, HIDDEN), dim=-1)}
    losses = []
    for gate in ([True, False], [False, True], [True, True], [True, True]):
        loss = theseus(gate, **batch).loss
        losses.append(float(loss))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    for name, parameter in theseus.named_parameters():
        assert torch.equal(parameter, before[name]) == (".successor." not in name), name
    assert losses[-1] < losses[-2]  # the same gate twice: the second step starts nearer the targets


def test_export_is_refused_naming_the_sentence_transformers_folder_it_takes(sentence_model, tmp_path):
    theseus = TheseusSentenceModel(_predecessor_copy(sentence_model), sentence_head(sentence_model), 2, "top")
    with pytest.raises(NotImplementedError, match=r"with_encoder\(model, theseus\.to_compact_model\(\)\.encoder\)"):
        theseus.export(tmp_path / "successor", sentence_model.tokenizer)
    assert not (tmp_path / "successor").exists()
    # What it names writes the folder sentence-transformers loads, as the compact model encodes
    with_encoder(sentence_model, theseus.to_compact_model().encoder).save(str(tmp_path / "successor"))
    expected = theseus.eval()(None, **sentence_model.tokenizer(SENTENCES, padding=True, return_tensors="pt")).logits
    loaded = SentenceTransformer(str(tmp_path / "successor"), device="cpu")
    assert torch.allclose(loaded.encode(SENTENCES, convert_to_tensor=True), expected.detach(), atol=1e-5)
