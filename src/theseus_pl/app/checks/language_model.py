"""What can be known to be wrong with a decoder-LM run once its predecessor's folder is at hand, before any compute:
the model's structure (read on the meta device: no weights), the window against its positions, the tokenizer, the
texts (the other held-out text must not be the training text), the zero-shot folder. The settings themselves are
checked as for every run (:mod:`~theseus_pl.app.checks.settings`)."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerBase

from theseus_pl.core.decoders import is_decoder
from theseus_pl.core.families import find_layer_stack
from theseus_pl.data.language_model import window_problem
from theseus_pl.data.sources import GlueDirSource
from theseus_pl.data.tasks import glue_task
from theseus_pl.data.text_corpus import text_source


def language_model_problems(cfg: DictConfig, predecessor_dir: str, tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """Every reason the run cannot work with this predecessor and tokenizer."""
    problems = []
    config = AutoConfig.from_pretrained(predecessor_dir)
    with torch.device("meta"):  # the model's structure, without its weights
        model = AutoModelForCausalLM.from_config(config)
    if not is_decoder(model):
        problems.append(f"model: {predecessor_dir} is not a causal language model of a known decoder family.")
    else:
        try:
            layers = len(find_layer_stack(model, cfg.theseus.get("layers_path")).layers)
        except ValueError as error:
            problems.append(f"theseus.layers_path: {error}")
        else:
            if not 1 <= cfg.theseus.successor_layers < layers:
                problems.append(
                    f"theseus.successor_layers={cfg.theseus.successor_layers} must be between 1 and {layers - 1} (the "
                    f"predecessor has {layers} layers)."
                )
    problem = window_problem(cfg.data.window, getattr(config, "max_position_embeddings", None))
    if problem:
        problems.append(problem)
    if tokenizer.eos_token_id is None:
        problems.append("The tokenizer has no end-of-text token (eos_token) to put between documents.")
    problems += _text_problems(cfg.data)
    if cfg.evaluation.get("zero_shot_glue_dir"):
        try:
            GlueDirSource(cfg.evaluation.zero_shot_glue_dir).path(glue_task("SST-2"), "validation")
        except FileNotFoundError as error:
            problems.append(f"evaluation.zero_shot_glue_dir: {error}")
    if getattr(config, "use_cache", False) and cfg.model.get("use_cache") is True:
        problems.append("model.use_cache=true: training runs without the KV cache; leave it out.")
    return problems


def _text_problems(data: DictConfig) -> list[str]:
    """The training text and the other held-out text name texts that exist, and not the same one (compared by their
    fingerprints: the same files' contents, the same hub dataset, configuration, split and column, the same corpus)."""
    try:
        training = text_source(data)
        other = text_source(data.other_text, "data.other_text") if data.get("other_text") else None
    except (ValueError, FileNotFoundError, ModuleNotFoundError) as error:
        return [str(error)]
    if training is None:
        return ["data: name the text to train on: data.files, data.hub_dataset or data.corpus."]
    if other is not None and other.fingerprint() == training.fingerprint():
        return [
            f"data.other_text is the training text ({training.describe()}): it must come from another source to "
            "say anything the held-out split does not; name another (e.g. data.other_text.corpus=guardian_headlines) "
            "or data.other_text.corpus=null to score none."
        ]
    return []
