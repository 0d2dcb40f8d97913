"""A decoder (GPT-2, most Llamas: a tokenizer and config without a padding token) fine-tuned into a task's
classifier, as the refusal of a decoder given as ``model.predecessor`` advises (``model.base=...``)."""

import pytest
import torch
from decoder_models import tiny_bpe_tokenizer, tiny_decoder
from glue_files import make_glue_dir

from theseus_pl.app.predecessors.classifier import load_classifier
from theseus_pl.data.datamodule import TextTaskDataModule

pytestmark = pytest.mark.quick


def test_a_decoder_without_a_padding_token_trains_on_batches_of_rows_of_different_lengths(tmp_path):
    """Fine-tuning failed at its first batch: "Cannot handle batch sizes > 1 if no padding token is defined"."""
    base = tmp_path / "gpt2"
    tokenizer = tiny_bpe_tokenizer()
    assert tokenizer.pad_token is None
    # its config names the tokenizer's end-of-text token, as a real decoder's does
    tiny_decoder("gpt2", vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id).save_pretrained(base)
    tokenizer.save_pretrained(base)
    glue_dir = make_glue_dir(tmp_path / "glue")
    datamodule = TextTaskDataModule("MRPC", str(base), glue_dir=str(glue_dir), cache_dir=tmp_path / "cache",
                                    batch_size=2)  # fmt: skip
    assert datamodule.tokenizer.pad_token == datamodule.tokenizer.eos_token
    datamodule.setup("fit")
    batch = next(iter(datamodule.train_dataloader()))
    assert len(batch["input_ids"]) == 2 and not batch["attention_mask"].all()  # padded: rows of different lengths
    model = load_classifier(str(base), datamodule.task, new_head=True)
    assert model.config.pad_token_id == tokenizer.eos_token_id
    output = model(**batch)
    assert output.logits.shape == (2, 2) and torch.isfinite(output.loss)
