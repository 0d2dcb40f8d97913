"""A decoder-LM run's windows of text, as the run and the commands on a finished run's folder read them."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from transformers import PreTrainedTokenizerBase

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.data.language_model import LanguageModelingDataModule
from theseus_pl.data.text_corpus import TextSource, text_source


def language_model_datamodule(
    cfg: DictConfig, tokenizer: PreTrainedTokenizerBase, cache_dir: Path
) -> LanguageModelingDataModule:
    """The run's training and held-out windows (``data.*``), tokenised once into the cache; refused in words where the
    text cannot be read."""
    data = cfg.data
    try:
        datamodule = LanguageModelingDataModule(
            tokenizer, training_source(data), window=data.window, batch_size=data.batch_size,
            eval_batch_size=data.get("eval_batch_size"), held_out=data.held_out, seed=cfg.seed,
            split_seed=data.get("split_seed", 0),
            max_eval_windows=data.get("max_eval_windows"), cache_dir=cache_dir / "tokenized",
        )  # fmt: skip
        datamodule.prepare_data()
    except (ValueError, FileNotFoundError) as error:
        raise RunRefused([str(error)]) from None
    return datamodule


def training_source(data: DictConfig) -> TextSource:
    """The text ``data`` names to train on: its files, a hub dataset or a packaged corpus."""
    source = text_source(data)
    if source is None:
        raise ValueError("data: name the text to train on: data.files, data.hub_dataset or data.corpus.")
    return source
