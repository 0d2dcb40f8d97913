"""Decoder weights from a GGUF file (llama.cpp's format), converted once into a plain safetensors folder.

transformers reads a GGUF file (dequantised to float) given the ``gguf`` package, which takes about 7 s for
SmolLM2-135M on 2 cores (:mod:`theseus_pl.deployment.gguf_reading`) and leaves a model that ``save_pretrained``
refuses ("quantized with gguf ... not serializable"): the weights are copied into a model built from the same config
without the quantisation record and saved with the tokenizer. Every later run loads that folder in well under a
second. The cache entry is keyed by the file's content, so a copied or re-installed file finds it again.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import logging
from pathlib import Path

from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from theseus_pl.data.cache_entry import content_digest, load_or_build
from theseus_pl.deployment.gguf_reading import gguf_parsed_once, read_gguf_model

log = logging.getLogger(__name__)

EXTRA = 'pip install "theseus_pl[lm]"'  # gguf and accelerate


def gguf_problem(path: Path) -> str | None:
    """Why the GGUF file at ``path`` cannot be read here; None when it can."""
    if not path.is_file():
        return f"model.gguf: no file at {path}."
    missing = [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        return f"Reading a GGUF file needs the package(s) {', '.join(missing)}: run `{EXTRA}`."
    return None


def converted_gguf(path: Path, cache_dir: Path) -> Path:
    """The folder holding ``path``'s model and tokenizer as safetensors, converted on first use."""
    problem = gguf_problem(path)
    if problem:
        raise ValueError(problem)
    digest = hashlib.sha256(content_digest(path).encode()).hexdigest()[:16]
    folder = cache_dir / "gguf" / f"{path.stem}-{digest}"

    def build(staging: Path) -> None:
        log.info("Converting %s to a safetensors folder (once: later runs load %s)", path.name, folder)
        with gguf_parsed_once():  # the weights' and the tokenizer's reads share one parse of the file
            try:
                model = read_gguf_model(path)
            except (ValueError, KeyError) as error:  # an architecture transformers' GGUF reader does not know
                raise ValueError(f"transformers cannot load {path.name} as a causal language model: {error}") from error
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        config = copy.deepcopy(model.config)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
        plain.load_state_dict(model.state_dict(), strict=True)
        plain.save_pretrained(staging)
        tokenizer.save_pretrained(staging)

    def load(entry: Path) -> Path:
        AutoConfig.from_pretrained(entry)  # a readable config, or the entry is rebuilt
        return entry

    converted, _ = load_or_build(folder, load, build, f"the converted {path.name}")
    return converted
