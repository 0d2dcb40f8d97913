"""A run's peak memory: measured (the process's resident set on the CPU, the accelerator's allocated peak on CUDA),
estimated before the run (:func:`training_memory_bytes`), and lowered by activation checkpointing
(:func:`checkpoint_activations`).

A Hydra multirun runs its jobs in one process, so a peak since the process started would hand one job's peak to every
later job. On Linux the resident-set peak (``VmHWM``) is reset at the start of a run by writing ``5`` to
``/proc/self/clear_refs``; where that file is missing (macOS) the peak is the process's since it started
(``getrusage``), and the record says so. CUDA's peak statistics are reset likewise.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import torch
from torch import nn
from transformers import (
    MODEL_FOR_CAUSAL_LM_MAPPING,
    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING,
    PretrainedConfig,
    PreTrainedModel,
)

from theseus_pl.core.memory_record import PeakMemory

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")


def start_peak_memory() -> str:
    """Reset the peaks the run will report; ``run`` where the resident-set peak could be reset, else ``process``."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return "process"
    return "run"


def peak_memory(since: str) -> PeakMemory:
    """The peaks since :func:`start_peak_memory` (which returned ``since``)."""
    gpu = torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None
    return PeakMemory(_resident_peak_mb(), gpu, since)


def _resident_peak_mb() -> float:
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, kB on Linux


# Bytes kept for the backward pass per hidden unit, token and layer under bf16 autocast: measured on SmolLM2-135M's
# runs on an H200 (docs/guide/decoder-lms.md#memory), where the formula below meets the recorded peaks within 20 %.
ACTIVATION_BYTES = 100
# With activation checkpointing a layer keeps only its input for the backward pass (the fp32 residual stream).
CHECKPOINTED_BYTES = 4


def training_memory_bytes(
    trained: int,
    frozen: int,
    tokens: int,
    vocab: int,
    hidden: int,
    layers: int,
    distils: bool,
    checkpointed: bool = False,
) -> int:
    """A decoder run's peak accelerator memory by the decoder guide's formula, to size a run before renting the
    machine: ``16·T`` (the ``trained`` parameters in fp32 with their gradients and AdamW's two moments) + ``4·F`` (the
    ``frozen`` fp32 ones: the predecessor Theseus holds, a teacher) + ``N·(12·V + 100·h·l)`` for the ``tokens`` a step:
    the fp32 logits with their softmax and gradient (twice when distilling: the teacher's and the KL) and the
    activations of the ``layers`` a step runs; ``checkpointed`` (activation checkpointing): ``N·(12·V + 4·h·l +
    100·h)``, each layer's input kept and one layer's activations while the backward pass recomputes it."""
    logits = 12 * vocab * (2 if distils else 1)
    if checkpointed:
        return 16 * trained + 4 * frozen + tokens * (logits + hidden * (CHECKPOINTED_BYTES * layers + ACTIVATION_BYTES))
    return 16 * trained + 4 * frozen + tokens * (logits + ACTIVATION_BYTES * hidden * layers)


def checkpointing_problem(config: PretrainedConfig, causal_lm: bool) -> str | None:
    """Why transformers cannot checkpoint the activations of the model this config makes (a sequence classifier, or a
    causal LM); None where it can. Said before compute: transformers raises only once the model is built."""
    mapping = MODEL_FOR_CAUSAL_LM_MAPPING if causal_lm else MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING
    model_class = mapping.get(type(config), None)
    if model_class is None or model_class.supports_gradient_checkpointing:
        return None
    return (
        f"activation_checkpointing=true: transformers' {model_class.__name__} has no activation checkpointing. Leave "
        "it false."
    )


def checkpoint_activations(module: nn.Module) -> list[str]:
    """Activation checkpointing, by transformers' own switch, for every model inside ``module`` that trains: each
    layer keeps only its input, and the backward pass runs the layer forward again for the rest (memory for compute;
    non-reentrant, and the random state restored, so the step computes what it would have). The names of the models
    switched on (the outermost of nested ones; frozen teachers are left alone). transformers also makes the frozen
    embeddings' output require a gradient, for reentrant checkpointing; non-reentrant needs none, so that is undone:
    otherwise the backward pass would run on through frozen layers below the lowest trained one, for nothing."""
    switched: list[str] = []
    for name, model in module.named_modules():
        if not isinstance(model, PreTrainedModel) or any(
            outer == "" or name.startswith(f"{outer}.") for outer in switched
        ):
            continue
        if not any(parameter.requires_grad for parameter in model.parameters()):
            continue
        # transformers 5 renamed gradient_checkpointing_enable to activation_checkpointing_enable (the old name is
        # deprecated); the old one registers no input hook outside PEFT
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is None:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
            model.disable_input_require_grads()
        switched.append(name)
    return switched
