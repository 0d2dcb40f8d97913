"""Language-model windows: the split by document, the packing, the cache and the loaders."""

import pytest
import torch
from decoder_models import InMemoryText, tiny_documents, tiny_lm_tokenizer

from theseus_pl.data.language_model import (
    IGNORED,
    LanguageModelingDataModule,
    held_out_documents,
    pack_windows,
    tokenized_windows,
    window_problem,
)

pytestmark = pytest.mark.quick


def _unpadded(windows) -> list[int]:
    """The windows' tokens in order, without padding."""
    pairs = zip(windows["input_ids"], windows["attention_mask"], strict=True)
    return [token for ids, mask in pairs for token, real in zip(ids, mask, strict=True) if real]


def test_packing_covers_every_token_once_in_order_and_pads_only_the_last_window():
    documents = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    windows = pack_windows(documents, window=4, separator=2, pad=0)
    assert windows["input_ids"] == [[5, 6, 7, 2], [8, 9, 2, 10], [11, 12, 13, 2]]
    assert all(len(ids) == 4 for ids in windows["input_ids"])
    short = pack_windows(documents, window=5, separator=2, pad=0)
    assert short["input_ids"][-1] == [13, 2, 0, 0, 0]
    assert short["attention_mask"][-1] == [1, 1, 0, 0, 0]
    assert short["labels"][-1] == [13, 2, IGNORED, IGNORED, IGNORED]
    assert all(mask == [1] * 5 for mask in short["attention_mask"][:-1])
    assert _unpadded(short) == [5, 6, 7, 2, 8, 9, 2, 10, 11, 12, 13, 2]


def test_a_text_only_scored_is_every_document_in_validation_windows(tmp_path):
    tokenizer = tiny_lm_tokenizer()
    documents = tiny_documents(count=4, words=23)
    windows = tokenized_windows(InMemoryText(documents), tokenizer, 16, held_out=None, seed=0, cache_dir=tmp_path)
    assert list(windows) == ["validation"]
    expected = []
    for document in documents:
        expected += tokenizer(document, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert _unpadded(windows["validation"]) == expected


def test_the_held_out_documents_are_a_pure_function_of_the_seed():
    first = held_out_documents(50, 0.1, seed=3)
    assert first == held_out_documents(50, 0.1, seed=3)
    assert len(first) == 5 and first == sorted(first) and len(set(first)) == 5
    assert first != held_out_documents(50, 0.1, seed=4)
    assert len(held_out_documents(3, 0.1, seed=0)) == 1  # never an empty held-out split


def test_one_document_cannot_be_split():
    with pytest.raises(ValueError, match=r"1 document.*none to train on"):
        held_out_documents(1, 0.1, seed=0)


def test_the_windows_split_by_document_and_hold_every_token_once(tmp_path):
    tokenizer = tiny_lm_tokenizer()
    documents = tiny_documents(count=10, words=23)
    windows = tokenized_windows(InMemoryText(documents), tokenizer, window=16, held_out=0.2, seed=0, cache_dir=tmp_path)
    held = held_out_documents(10, 0.2, seed=0)
    for split, chosen in (("train", [i for i in range(10) if i not in held]), ("validation", held)):
        rows = windows[split]
        tokens = _unpadded(rows)
        expected = []
        for i in chosen:
            expected += tokenizer(documents[i], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        assert tokens == expected


def test_the_windows_are_tokenised_once_and_then_read_from_the_cache(tmp_path):
    source = InMemoryText(tiny_documents())
    first = tokenized_windows(source, tiny_lm_tokenizer(), 16, 0.2, 0, cache_dir=tmp_path)
    again = tokenized_windows(source, tiny_lm_tokenizer(), 16, 0.2, 0, cache_dir=tmp_path)
    assert source.reads == 1
    assert again["validation"]["input_ids"] == first["validation"]["input_ids"]
    tokenized_windows(source, tiny_lm_tokenizer(), 8, 0.2, 0, cache_dir=tmp_path)  # another window: rebuilt
    assert source.reads == 2


def test_text_shorter_than_a_window_is_refused_with_the_fix(tmp_path):
    source = InMemoryText(tiny_documents(count=10, words=3))
    with pytest.raises(ValueError, match=r"validation split .* 4 tokens, fewer than one window of 16: .*data.window"):
        tokenized_windows(source, tiny_lm_tokenizer(), 16, 0.1, 0, cache_dir=tmp_path)


def test_a_window_longer_than_the_models_positions_is_named():
    assert "max_position_embeddings" in window_problem(256, 128)
    assert window_problem(128, 128) is None
    assert "at least 2" in window_problem(1, None)


def _datamodule(tmp_path, **settings) -> LanguageModelingDataModule:
    datamodule = LanguageModelingDataModule(
        tiny_lm_tokenizer(), InMemoryText(tiny_documents(count=20)), window=8, batch_size=4, cache_dir=tmp_path,
        **settings,
    )  # fmt: skip
    datamodule.setup("fit")
    return datamodule


def test_batches_are_whole_windows_with_their_labels(tmp_path):
    batch = next(iter(_datamodule(tmp_path).train_dataloader()))
    assert batch["input_ids"].shape == (4, 8)
    assert batch["input_ids"].dtype == torch.long
    assert torch.equal(batch["labels"], batch["input_ids"])  # full windows: no padding to ignore


def test_the_training_order_is_fixed_by_the_seed_apart_from_the_split_and_resumes_mid_epoch(tmp_path):
    datamodule = _datamodule(tmp_path, seed=1)
    epoch = [batch["input_ids"] for batch in datamodule.train_dataloader()]
    again = [batch["input_ids"] for batch in _datamodule(tmp_path, seed=1).train_dataloader()]
    other = [batch["input_ids"] for batch in _datamodule(tmp_path, seed=2).train_dataloader()]
    assert len(epoch) == len(again) > 3
    assert all(torch.equal(a, b) for a, b in zip(epoch, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(epoch, other, strict=True))
    assert (
        _datamodule(tmp_path, seed=2).splits["validation"]["input_ids"] == datamodule.splits["validation"]["input_ids"]
    )
    resumed = _datamodule(tmp_path, seed=1)
    resumed.load_state_dict({"train_batches_done": 3})
    rest = [batch["input_ids"] for batch in resumed.train_dataloader()]
    assert len(rest) == len(epoch) - 3
    assert all(torch.equal(a, b) for a, b in zip(epoch[3:], rest, strict=True))


def test_held_out_windows_can_be_capped_to_the_first_ones(tmp_path):
    full = _datamodule(tmp_path).splits["validation"]
    capped = _datamodule(tmp_path, max_eval_windows=2).splits["validation"]
    assert capped["input_ids"] == full["input_ids"][:2]
