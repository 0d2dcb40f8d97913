"""Zero-shot classification by a causal LM: the likelier answer token right after each prompt."""

from types import SimpleNamespace

import pytest
import torch
from decoder_models import DECODER_VOCAB, tiny_lm_tokenizer
from torch import nn

from theseus_pl.lightning.language_model_zero_shot import answer_tokens, zero_shot_accuracy

SETTINGS = {"accelerator": "cpu", "precision": "32-true", "devices": 1, "enable_model_summary": False}
PROMPT = "{text} said"
ANSWERS = (" not", " more")  # labels 0 and 1


class BagOfWords(nn.Module):
    """A causal stand-in LM: the logits at position t are the sum over tokens up to t of each token's row, so a
    word pushes its answer at every later position, and padding (id 0) pushes answer 0 hard."""

    def __init__(self, tokenizer, pushes: dict[str, str]) -> None:
        super().__init__()
        self.table = torch.zeros(DECODER_VOCAB, DECODER_VOCAB)
        ids = tokenizer.convert_tokens_to_ids
        for word, answer in pushes.items():
            self.table[ids(word), ids(answer)] = 1.0
        self.table[tokenizer.pad_token_id, ids(ANSWERS[0].strip())] = 100.0

    def forward(self, input_ids, attention_mask=None, use_cache=False):
        return SimpleNamespace(logits=self.table[input_ids].cumsum(dim=1))


def test_each_prompt_is_read_at_its_last_token_not_at_the_padding():
    tokenizer = tiny_lm_tokenizer()
    model = BagOfWords(tokenizer, {"economy": "more", "jobs": "not"})
    texts = ["the economy", "jobs", "the economy is the economy of the nation", "the jobs of the year"]
    labels = [1, 0, 1, 0]  # the short rows of label 1 are padded: read at the padding they would score 0
    assert zero_shot_accuracy(model, tokenizer, texts, labels, SETTINGS, PROMPT, ANSWERS, batch_size=4) == 1.0
    assert zero_shot_accuracy(model, tokenizer, texts, [0, 1, 0, 1], SETTINGS, PROMPT, ANSWERS) == 0.0
    assert zero_shot_accuracy(model, tokenizer, texts, [1, 1, 1, 1], SETTINGS, PROMPT, ANSWERS, batch_size=3) == 0.5


def test_answers_starting_with_the_same_token_are_refused():
    with pytest.raises(ValueError, match="start with the same token"):
        answer_tokens(tiny_lm_tokenizer(), [" positive", " negative"])  # both unknown words: <unk>


def test_texts_and_labels_must_pair_up():
    tokenizer = tiny_lm_tokenizer()
    with pytest.raises(ValueError, match="as many labels as texts"):
        zero_shot_accuracy(BagOfWords(tokenizer, {}), tokenizer, ["the"], [0, 1], SETTINGS, PROMPT, ANSWERS)
