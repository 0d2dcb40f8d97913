"""The sentences of a sentence-embedding run: each distinct training sentence once, a held-out draw that a smaller
budget shares, and batches whose targets stay with their sentences."""

import pytest
import torch
from conftest import make_tiny_tokenizer
from embedding_models import make_sentence_glue_dir, tiny_sentences

from theseus_pl.data.sentences import (
    SentenceDataModule,
    corpus_sentences,
    glue_sentences,
    held_out_split,
    split_sentences,
)
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task

pytestmark = pytest.mark.quick


def test_glue_sentences_are_every_text_column_of_the_training_splits_each_once(tmp_path):
    source = GlueDirSource(make_sentence_glue_dir(tmp_path / "glue"))
    stsb, both = glue_sentences(source, ["STS-B"]), glue_sentences(source, ["STS-B", "CoLA", "STS-B"])
    rows = source.read(glue_task("STS-B"), "train")
    assert set(stsb) == {*rows["sentence1"], *rows["sentence2"]} and len(stsb) == len(set(stsb))
    assert both[: len(stsb)] == stsb and len(both) == len(set(both)) > len(stsb)  # CoLA's after, none twice


def test_a_transcripts_lines_become_sentences_without_speakers_asides_or_fragments():
    document = (
        "BARACK OBAMA: Thank you. (Applause.) Tonight we speak of the economy. Better now? Yes, it is!\n"
        'Quijano: I\'m Elaine Quijano, anchor at CBSN. "We will see," he said in the hall.\n'
        "Five key areas Sunak must tackle to serve up recovery"
    )
    assert split_sentences(document) == [
        "Tonight we speak of the economy.",
        "I'm Elaine Quijano, anchor at CBSN.",
        '"We will see," he said in the hall.',
        "Five key areas Sunak must tackle to serve up recovery",
    ]  # "Thank you.", "Better now?" and "Yes, it is!" are under four words


def test_corpus_sentences_come_from_the_offline_corpora_each_once_and_an_unknown_name_is_refused():
    headlines = corpus_sentences(["guardian_headlines"])
    assert len(headlines) > 3000 and len(headlines) == len(set(headlines))
    assert all(len(sentence.split()) >= 4 and "\n" not in sentence for sentence in headlines)
    both = corpus_sentences(["guardian_headlines", "presidential_debates_2016"])
    assert both[: len(headlines)] == headlines and len(both) > len(headlines)
    with pytest.raises(
        ValueError, match=r"^data.corpora: wikipedia is no corpus here: name any of convention_speeches"
    ):
        corpus_sentences(["wikipedia"])


def test_the_held_out_draw_is_fixed_and_a_smaller_budget_trains_on_the_first_sentences_of_a_larger_one():
    sentences = tiny_sentences(60, seed=3)
    train, held_out = held_out_split(sentences, 10, None, seed=0)
    small, same_held_out = held_out_split(sentences, 10, 20, seed=0)
    assert len(held_out) == 10 and not set(train) & set(held_out) and set(train) | set(held_out) == set(sentences)
    assert same_held_out == held_out and small == train[:20]
    assert held_out_split(sentences, 10, None, seed=1)[1] != held_out
    with pytest.raises(ValueError, match=r"^data.held_out=60 leaves no training sentence of the 60 there are"):
        held_out_split(sentences, 60, None, seed=0)


def test_batches_carry_each_sentences_own_target_and_the_length_order_says_where_each_went(tmp_path):
    sentences = tiny_sentences(20, seed=4)
    data = SentenceDataModule(make_tiny_tokenizer(tmp_path), sentences, sentences[:4], batch_size=8, seed=0)
    targets = torch.arange(20, dtype=torch.float).unsqueeze(1).repeat(1, 3)  # sentence i's target: i, i, i
    data.set_targets("train", targets)
    lengths = data.splits["train"].lengths
    for batch in data.train_dataloader():
        for mask, target in zip(batch["attention_mask"], batch["labels"], strict=True):
            assert int(mask.sum()) == lengths[int(target[0])]  # the row's own target, padded to the batch's longest
    loader, order = data.by_length("train")
    rows = torch.cat([batch["labels"] for batch in loader])
    assert torch.equal(rows[:, 0], order.float()) and [lengths[i] for i in order] == sorted(lengths, reverse=True)
    with pytest.raises(ValueError, match="3 vectors for the 20 train sentences"):
        data.set_targets("train", targets[:3])
