"""GGUF files read by transformers, each parsed once and its tensor-name map built once.

transformers (5.25) reads a GGUF file through gguf's ``GGUFReader`` once for the config, once for the weights and once
for the tokenizer, and each parse walks the file's metadata in Python (SmolLM2-135M's 49k-token vocabulary: about 2.2
s a parse on 2 cores). Mapping the tensor names, it walks the model's modules and at each asks gguf's
``get_tensor_name_map(architecture, layers)`` for the whole architecture's map anew (4.8 s of SmolLM2's 17 s
conversion). Both depend only on their arguments and are only read, so while transformers reads a file both are
memoized: the conversion takes about 7 s. transformers imports both from gguf's module as it reads, which is where
they are swapped, for the duration of the ``with`` block; nothing else here reaches into either library.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

MEMOIZED = ("GGUFReader", "get_tensor_name_map")


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within the block, each GGUF file transformers reads is parsed once and each name map built once; a block
    inside another shares the outer one's."""
    import gguf

    if all(hasattr(getattr(gguf, name), "cache_info") for name in MEMOIZED):  # memoized by an enclosing block
        yield
        return
    originals = {name: getattr(gguf, name) for name in MEMOIZED}
    for name, original in originals.items():
        setattr(gguf, name, functools.cache(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(gguf, name, original)


def read_gguf_model(path: Path) -> PreTrainedModel:
    """The GGUF file at ``path`` as a transformers causal LM dequantised to fp32, in evaluation mode, as a user of
    transformers would load it."""
    with gguf_parsed_once():
        return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
