"""A GGUF file read by transformers as a causal LM, without rebuilding gguf's tensor-name map at every module.

transformers (5.25) maps the file's tensor names to its own by walking the model's modules, and at every module it
walks asks gguf's ``get_tensor_name_map(architecture, layers)`` for the whole architecture's map anew: for
SmolLM2-135M, 4.8 s of the 17 s its conversion took. The map depends only on its two arguments and is only read, so
while transformers reads the file that function is cached. transformers imports it from gguf's module at each call,
which is where it is swapped; nothing else here reaches into either library.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel


@contextmanager
def _tensor_name_maps_built_once() -> Iterator[None]:
    import gguf

    built_each_time = gguf.get_tensor_name_map
    gguf.get_tensor_name_map = functools.cache(built_each_time)
    try:
        yield
    finally:
        gguf.get_tensor_name_map = built_each_time


def read_gguf_model(path: Path) -> PreTrainedModel:
    """The GGUF file at ``path`` as a transformers causal LM dequantised to fp32, in evaluation mode, as a user of
    transformers would load it."""
    with _tensor_name_maps_built_once():
        return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
