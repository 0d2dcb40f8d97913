"""The decoder deploy stage: the successor as GGUF files for llama.cpp, checked against PyTorch and timed there.

For each type asked (``deploy.gguf``), the successor is written to ``successor/gguf/model.<type>.gguf``, read back by
transformers and compared with the PyTorch successor on held-out windows (top-1 agreement against the type's floor,
the largest logit difference, the perplexity the file gives). Where llama.cpp's binding is installed and asked for
(``deploy.llama_cpp``), the predecessor is written at the same type (once, into the cache) and both files are timed
in llama.cpp at batch 1 and scored there (their perplexity on the same windows, from llama.cpp's own logits). The
rows go into ``results.json`` (``gguf``) and the model card.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from theseus_pl.core.timing import was_busy
from theseus_pl.data.cache_entry import bytes_digest, folder_contents, load_or_build
from theseus_pl.deployment.gguf_export import AGREEMENT_FLOORS, export_gguf, gguf_logit_check
from theseus_pl.deployment.gguf_types import GGUF_TYPES
from theseus_pl.deployment.llama_cpp_runtime import llama_cpp_perplexity, llama_cpp_speed

log = logging.getLogger(__name__)


def deploy_gguf(
    successor_dir: Path,
    successor: PreTrainedModel,
    predecessor_dir: Path,
    types: list[str],
    windows: torch.Tensor,
    tokenizer_gguf: Path | None = None,
    timing: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """A row per type: ``type``, ``file`` (relative to the successor's folder), ``mib``, the check's
    ``max_logit_diff``, ``agreement`` and ``perplexity``, ``agreement_floor``, and ``llama_cpp`` (tokens per second,
    speed-ups and both files' perplexity there; None where llama.cpp was not asked for or is not installed).
    ``windows``: held-out token ids (rows x length), the first row also the timing's prefill and its first 16 tokens
    the decode prompt. ``timing``: ``repeats``, ``new_tokens``, ``threads``, or None for no llama.cpp timing.

    An earlier deployment's files are removed first (:func:`gguf_deployment_files`): ``gguf/`` then holds the files
    the rows name and none of other types (``publish`` uploads the folder), and any file of the user's own, such as a
    k-quant ``llama-quantize`` made from ``model.f16.gguf``, as it was (the folder was emptied). A deployment that
    does not finish removes the files it wrote."""
    for path in gguf_deployment_files(successor_dir):
        path.unlink()
    with torch.no_grad():
        reference = successor.float().eval()(windows).logits  # once, for every file
    try:
        return [_deployed(kind, successor_dir, reference, windows, predecessor_dir, tokenizer_gguf, timing, cache_dir)
                for kind in types]  # fmt: skip
    except BaseException:  # Ctrl-C, or a failure midway: no file is left without the row that describes it
        for path in gguf_deployment_files(successor_dir):
            path.unlink()
        raise


def _deployed(
    kind: str,
    successor_dir: Path,
    reference: torch.Tensor,
    windows: torch.Tensor,
    predecessor_dir: Path,
    tokenizer_gguf: Path | None,
    timing: dict[str, Any] | None,
    cache_dir: Path | None,
) -> dict[str, Any]:
    """One type's file written, checked against the PyTorch successor's ``reference`` logits and (``timing``) timed
    in llama.cpp beside the predecessor at that type: its row."""
    path = export_gguf(successor_dir, successor_dir / "gguf" / f"model.{kind}.gguf", kind, tokenizer_gguf)
    check = gguf_logit_check(reference, path, windows)
    floor = AGREEMENT_FLOORS[kind]
    if check.agreement < floor:
        log.warning(
            "GGUF %s agrees with the PyTorch successor on %.1f%% of next tokens, below this type's %.1f%%: check "
            "the file before shipping it.", kind, 100 * check.agreement, 100 * floor,
        )  # fmt: skip
    in_llama_cpp = None
    if timing is not None:
        predecessor = _predecessor_gguf(predecessor_dir, kind, tokenizer_gguf, cache_dir or successor_dir.parent)
        in_llama_cpp = _in_llama_cpp(predecessor, path, windows, timing)
        if was_busy(in_llama_cpp.get("other_cores")):
            log.warning("llama.cpp timed %s beside other processes (%.2f cores): its speed-ups are not the "
                        "model's.", kind, in_llama_cpp["other_cores"])  # fmt: skip
    return {"type": kind, "file": str(path.relative_to(successor_dir)), "mib": path.stat().st_size / 2**20,
            **asdict(check), "agreement_floor": floor, "llama_cpp": in_llama_cpp}  # fmt: skip


def gguf_deployment_files(successor_dir: Path) -> list[Path]:
    """The files in ``successor/gguf/`` a GGUF deployment writes: ``model.<type>.gguf`` of each type it makes."""
    return [path for kind in GGUF_TYPES if (path := successor_dir / "gguf" / f"model.{kind}.gguf").is_file()]


def _in_llama_cpp(
    predecessor: Path, successor: Path, windows: torch.Tensor, timing: dict[str, Any]
) -> dict[str, float]:
    """Both files in llama.cpp: their speeds and the successor's speed-ups (:func:`llama_cpp_speed`), and each one's
    perplexity on ``windows`` as llama.cpp computes it (``predecessor_perplexity``, ``successor_perplexity``)."""
    ids, threads = windows[0].tolist(), timing.get("threads")
    speed = llama_cpp_speed(predecessor, successor, ids, ids[:16], timing["new_tokens"], timing["repeats"], threads)
    scores = {f"{name}_perplexity": llama_cpp_perplexity(file, windows, threads)
              for name, file in (("predecessor", predecessor), ("successor", successor))}  # fmt: skip
    return {**speed, **scores}


def _predecessor_gguf(predecessor_dir: Path, kind: str, tokenizer_gguf: Path | None, cache_dir: Path) -> Path:
    """The predecessor written at ``kind`` for the timing's ratios, once per model folder's contents and type
    (cached; keyed by the folder's name where its weights were not one file, two predecessors in folders of one name
    shared one file)."""
    key = bytes_digest(json.dumps(folder_contents(predecessor_dir)).encode()).partition(":")[2][:24]

    def load(folder: Path) -> Path:
        if not (folder / "model.gguf").is_file():
            raise FileNotFoundError(f"{folder / 'model.gguf'} is missing.")
        return folder / "model.gguf"

    def build(staging: Path) -> None:
        export_gguf(predecessor_dir, staging / "model.gguf", kind, tokenizer_gguf)

    path, _ = load_or_build(cache_dir / "gguf-export" / f"{predecessor_dir.name}-{key}-{kind}", load, build,
                            f"the predecessor as GGUF {kind}")  # fmt: skip
    return path
