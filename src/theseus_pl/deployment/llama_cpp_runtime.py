"""Decoder models run where their users run them: llama.cpp, through its Python binding ``llama-cpp-python``.

Timed (:func:`llama_cpp_speed`): the predecessor's and the successor's GGUF files at the same type take turns
(:func:`interleaved_seconds`, which notices a busy machine), at batch 1 as a local chat or completion runs: prefill of
one held-out window, and decode of ``new_tokens`` tokens after a short prompt (each fed back greedily, one ``eval`` a
token). Scored (:func:`llama_cpp_perplexity`): the perplexity llama.cpp's own kernels give a file on held-out windows.
That is the figure a user of the file gets: for a quantised type llama.cpp also quantises the activations its matrix
products read, which transformers' read-back of the file (its weights dequantised to float) does not.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.functional import cross_entropy

from theseus_pl.core.decoders import perplexity_of
from theseus_pl.core.timing import interleaved_seconds, token_speeds

EXTRA = 'pip install "theseus_pl[llama-cpp]"'  # builds llama.cpp from source: a C++ compiler and about 6 minutes


def llama_cpp_problem() -> str | None:
    """Why llama.cpp cannot time models here (its binding not installed, with the fix); None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"timing GGUF files in llama.cpp needs llama-cpp-python: {EXTRA} (or deploy.llama_cpp=false)."
    return None


def llama_cpp_speed(
    predecessor: Path,
    successor: Path,
    window: Sequence[int],
    prompt: Sequence[int],
    new_tokens: int = 64,
    repeats: int = 3,
    threads: int | None = None,
) -> dict[str, float]:
    """Prefill and decode tokens per second of both GGUF files in llama.cpp and the successor's speed-ups
    (:func:`token_speeds`), with ``other_cores`` where the machine's load could be read."""
    models = {name: _load(path, len(window) + len(prompt) + new_tokens, threads)
              for name, path in (("predecessor", predecessor), ("successor", successor))}  # fmt: skip
    try:
        calls: dict[str, Callable[[], object]] = {}
        for name, model in models.items():
            calls[f"{name}_prefill"] = _prefill_call(model, window)
            calls[f"{name}_decode"] = _decode_call(model, prompt, new_tokens)
        times = interleaved_seconds(calls, repeats)
    finally:
        for model in models.values():
            model.close()
    return token_speeds(times, {"prefill": len(window), "decode": new_tokens})


def llama_cpp_perplexity(path: Path, windows: torch.Tensor, threads: int | None = None) -> float:
    """exp of the mean next-token cross-entropy of the GGUF file at ``path`` over ``windows`` (token ids, rows x
    length), from the logits llama.cpp computes, one window at a time."""
    model = _load(path, windows.shape[1], threads, logits_all=True)
    try:
        losses = []
        for window in windows.tolist():
            model.reset()
            model.eval(window)
            logits = torch.from_numpy(np.asarray(model.scores[: len(window) - 1]))
            losses.append(cross_entropy(logits, torch.tensor(window[1:]), reduction="none"))
    finally:
        model.close()
    return perplexity_of(float(torch.cat(losses).mean()))


def _load(path: Path, context: int, threads: int | None, logits_all: bool = False) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(path), n_ctx=context, n_batch=context, n_threads=threads, logits_all=logits_all,
                 verbose=False)  # fmt: skip


def _prefill_call(model: Any, window: Sequence[int]) -> Callable[[], object]:
    def call() -> object:
        model.reset()
        return model.eval(list(window))

    return call


def _decode_call(model: Any, prompt: Sequence[int], new_tokens: int) -> Callable[[], object]:
    def call() -> object:
        model.reset()
        model.eval(list(prompt))
        for _ in range(new_tokens):
            model.eval([model.sample(temp=0.0)])
        return model.n_tokens

    return call
