"""Tiny sentence-transformers models (a random tiny BERT and its pooling) and a GLUE folder of sentences for them."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

import torch
from conftest import FAMILY_CONFIGS, make_tiny_tokenizer
from glue_files import STSB_HEADER, write_tsv
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
from transformers import BertModel

HIDDEN = FAMILY_CONFIGS["bert"].hidden_size
LAYERS = FAMILY_CONFIGS["bert"].num_hidden_layers
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "he", "said", "hi", "is", "not", "good", "bad"]


def save_tiny_bert(folder: Path) -> Path:
    """A plain transformers folder: a tiny random 4-layer BERT encoder and its word-level tokenizer."""
    folder.mkdir(parents=True)
    tokenizer = make_tiny_tokenizer(folder)
    torch.manual_seed(0)
    BertModel(copy.deepcopy(FAMILY_CONFIGS["bert"])).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_embedding_model(folder: Path, normalize: bool = False) -> Path:
    """The tiny BERT as a sentence-transformers model (mean pooling, normalised vectors where asked), saved."""
    bert = save_tiny_bert(folder.parent / f"{folder.name}-bert")
    modules = [Transformer(str(bert)), Pooling(HIDDEN, "mean"), *([Normalize()] if normalize else [])]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder


def tiny_sentences(count: int, seed: int) -> list[str]:
    """``count`` distinct sentences of 2 to 8 of the tiny tokenizer's words."""
    generator = torch.Generator().manual_seed(seed)
    sentences: dict[str, None] = {}
    while len(sentences) < count:
        length = int(torch.randint(2, 9, (1,), generator=generator))
        picks = torch.randint(len(WORDS), (length,), generator=generator).tolist()
        sentences[" ".join(WORDS[i] for i in picks)] = None
    return list(sentences)


def make_sentence_glue_dir(root: Path) -> Path:
    """STS-B with 30 training pairs and 12 dev pairs of varied gold scores, CoLA with 20 training sentences and SST-2
    with 20 (half of them CoLA's too); the dev sentences are none of the training ones."""
    train, dev = tiny_sentences(80, seed=0), tiny_sentences(120, seed=1)
    dev = [sentence for sentence in dev if sentence not in set(train)][:24]
    row = ["0", "g", "f", "y", "1", "n", "n"]
    pairs = [[*row, train[2 * i], train[2 * i + 1], f"{i % 6}.000"] for i in range(30)]
    write_tsv(root / "STS-B" / "train.tsv", [STSB_HEADER, *pairs])
    write_tsv(root / "STS-B" / "dev.tsv", [STSB_HEADER, *[[*row, dev[2 * i], dev[2 * i + 1], f"{(i * 7) % 6}.500"]
                                                          for i in range(12)]])  # fmt: skip
    write_tsv(root / "CoLA" / "train.tsv", [["src", str(i % 2), "", sentence] for i, sentence in enumerate(train[60:])])
    sst2 = [[sentence, str(i % 2)] for i, sentence in enumerate(train[50:70])]
    write_tsv(root / "SST-2" / "train.tsv", [["sentence", "label"], *sst2])
    return root


def with_a_listed_vocabulary(model: Path, folder: Path, words: Sequence[str] = tuple(WORDS)) -> Path:
    """A copy of the tiny sentence-transformers ``model`` in ``folder`` whose ``tokenizer.json`` lists its special
    tokens, ``words`` (the tiny tokenizer's) and fillers up to the model's vocabulary size: what model2vec's
    distillation reads the vocabulary from. With no ``words``, every word of the dev pairs is unknown to it."""
    import json
    import shutil

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import BertTokenizerFast

    shutil.copytree(model, folder)
    size = json.loads((model / "config.json").read_text())["vocab_size"]
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = [*specials, *words, *[f"w{i}" for i in range(size - len(specials) - len(words))]]
    tokenizer = Tokenizer(models.WordPiece({word: i for i, word in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    pad, unk, cls, sep, mask = specials
    fast = BertTokenizerFast(tokenizer_object=tokenizer, pad_token=pad, unk_token=unk, cls_token=cls, sep_token=sep,
                             mask_token=mask)  # fmt: skip
    fast.save_pretrained(folder)
    return folder
