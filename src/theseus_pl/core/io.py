"""Saving and loading a compact successor, whatever its modules.

A successor whose class, built from its config, has exactly its parameters (the paper's copied layers, and narrower
feed-forward networks, which the config's feed-forward width describes) is saved as a plain Hugging Face checkpoint:
``AutoModelForSequenceClassification.from_pretrained`` (a decoder's: ``AutoModelForCausalLM``) loads it with no code
of ours. Modules from a custom factory fit no config, so such a successor is pickled whole (``successor.pt``, beside
its config and tokenizer); :func:`load_successor` loads either kind, and loading the pickle needs the factory's
module importable. A pickle names each class by its module, so successors pickled before the package was arranged in
floors name modules that have moved: :data:`MOVED_MODULES` maps them to where those classes live now.
"""

from __future__ import annotations

import pickle
import types
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch and transformers load and save models: asking what a folder holds needs neither
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

PICKLED = "successor.pt"
# The files a saved tokenizer leaves, one at least: a model folder without any is of no use to a reader.
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model",
    "spm.model", "sentencepiece.bpe.model", "source.spm",  # DeBERTa-v2's, XLM-R's and Marian's SentencePiece files
)  # fmt: skip


def has_tokenizer(folder: Path) -> bool:
    """Whether ``folder`` holds a saved tokenizer: without one, transformers makes up an empty-vocabulary tokenizer
    from the config's model type, every word becomes unknown, and what the model scores or serves is garbage."""
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


# The files a saved model's weights are in, one at least (transformers' names, and a pickled successor's).
WEIGHT_FILES = (
    "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json", PICKLED,
)  # fmt: skip


def has_weights(folder: Path) -> bool:
    """Whether ``folder`` holds a model's weights, which a folder copied without them (or cut short) lacks."""
    return any((folder / name).is_file() for name in WEIGHT_FILES)


def model_files_problem(folder: Path, tokenizer: bool = True) -> str | None:
    """What a model folder to train lacks, in words: its ``config.json``, its weights, or (``tokenizer``: the model
    the data is tokenised with) its tokenizer; None where it lacks none. Without a tokenizer transformers makes up
    one of an empty vocabulary, and a run trained on unknown tokens alone, scored chance and shipped that tokenizer;
    without weights it failed as it loaded them, after every check had passed."""
    missing = [] if (folder / "config.json").is_file() else ["config.json"]
    if not has_weights(folder):
        missing.append(f"weights ({' or '.join(WEIGHT_FILES[:4:2])})")
    if tokenizer and not has_tokenizer(folder):
        missing.append(f"tokenizer ({', '.join(TOKENIZER_FILES[:3])}, ...)")
    if not missing:
        return None
    return (
        f"{folder} holds no {' and no '.join(missing)}. Fix: copy the model's files into it "
        "(model.save_pretrained(folder) and tokenizer.save_pretrained(folder) write them)."
    )


# Where the classes a successor pickle can name lived before theseus_pl 0.2 arranged its modules in floors.
MOVED_MODULES = {
    "theseus_pl.narrow_width": "theseus_pl.core.successors.narrow_width",
    "theseus_pl.successors": "theseus_pl.core.successors.blocks",
    "theseus_pl.theseus": "theseus_pl.core.replacing",
}


class _MovedModulesUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        return super().find_class(MOVED_MODULES.get(module, module), name)


# torch.load reads a pickle with the Unpickler of the module-like object it is given.
_PICKLE = types.SimpleNamespace(__name__="pickle", Unpickler=_MovedModulesUnpickler, load=pickle.load)


def config_describes(model: PreTrainedModel) -> bool:
    """Whether a fresh model of ``model``'s class and config has the same parameters, by name and shape (built on
    the meta device: no memory, no initialisation)."""
    import torch

    with torch.device("meta"):
        fresh = type(model)(model.config)
    return {k: v.shape for k, v in fresh.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}


def save_successor(
    model: PreTrainedModel, directory: str | Path, tokenizer: PreTrainedTokenizerBase | None = None
) -> Path:
    """``model`` (and its tokenizer) in ``directory``: a plain checkpoint when its config describes it, else its
    config and the pickled module."""
    import torch

    directory = Path(directory)
    if config_describes(model):
        model.save_pretrained(directory)
    else:
        model.config.architectures = [type(model).__name__]  # as save_pretrained records it, for readers of config
        model.config.save_pretrained(directory)
        torch.save(model, directory / PICKLED)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return directory


def is_sequence_classifier(config: PretrainedConfig) -> bool:
    """Whether a checkpoint's config names a sequence-classification class (``...ForSequenceClassification``) among
    its ``architectures``: the only kind theseus_pl compresses and deploys."""
    return any(name.endswith("ForSequenceClassification") for name in config.architectures or [])


def is_causal_lm(config: PretrainedConfig) -> bool:
    """Whether a checkpoint's config names a causal-LM class (``...ForCausalLM``, GPT-2's ``GPT2LMHeadModel``) among
    its ``architectures``: a decoder's successor, which a sequence-classification class would load with a new, random
    head in place of its language-model head."""
    return any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in config.architectures or [])


def is_pickled(directory: str | Path) -> bool:
    return (Path(directory) / PICKLED).is_file()


def load_successor(directory: str | Path) -> PreTrainedModel:
    """The successor saved in ``directory`` by :func:`save_successor` (or any sequence-classification checkpoint, or
    a decoder's causal LM), in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    if is_pickled(directory):
        path = Path(directory) / PICKLED
        return torch.load(path, map_location="cpu", weights_only=False, pickle_module=_PICKLE).eval()
    config = AutoConfig.from_pretrained(directory)
    model_class = AutoModelForCausalLM if is_causal_lm(config) else AutoModelForSequenceClassification
    return model_class.from_pretrained(directory, config=config).eval()
