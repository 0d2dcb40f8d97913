"""Soft targets from a frozen teacher: the loss, the settings' rules, and the teacher's logits remembered per row.

Shared by the KD baselines (:mod:`theseus_pl.lightning.baselines`) and Theseus with its predecessor's logits
(``TheseusModule(alpha=...)``), for a task model (one distribution per row) and a causal language model (one
next-token distribution per predicted position).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from transformers.pytorch_utils import Conv1D

from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.settings import Rule, number, positive_number
from theseus_pl.lightning.language_model_metrics import predicted_positions

# alpha mixes soft targets in (alpha * KD + (1 - alpha) * task loss) at the temperature.
SOFT_TARGET_RULES = {
    "alpha": Rule(lambda v: number(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "temperature": Rule(positive_number, "a number above 0"),
}
# The layers whose weights bf16 autocast casts on every call (linear, addmm), so may be stored in bf16.
AUTOCAST_MATRIX_PRODUCTS = (nn.Linear, Conv1D)


def distillation_loss(
    student: torch.Tensor, teacher: torch.Tensor, temperature: float, labels: torch.Tensor | None = None
) -> torch.Tensor:
    """Soft-target loss: T² · KL(teacher ‖ student) at temperature T, averaged over rows; MSE for a regression head.

    A language model's logits (batch x positions x vocabulary) are compared at the positions that predict a real
    next token (``labels`` say which; padding is left out), each such position a row: the mean over predicted
    tokens of the KL between the two next-token distributions, in fp32. Memory: the two logit sets at those
    positions in fp32, their (log-)softmaxes, and the student's kept for the backward pass: about five copies of
    tokens x vocabulary floats (SmolLM2, 8 x 128 tokens of a 49,152-token vocabulary: about 1 GB). Nothing is
    truncated to the teacher's top tokens, which would bias the KL; fewer windows per batch (with gradient
    accumulation) is the lever.
    """
    if student.dim() == 3:
        if labels is None:
            raise ValueError("A language model's soft targets are compared per predicted token: pass the labels.")
        student, _ = predicted_positions(student, labels)
        teacher, _ = predicted_positions(teacher, labels)
    if student.shape[-1] == 1:
        return F.mse_loss(student, teacher)
    return (
        F.kl_div(
            F.log_softmax(student / temperature, dim=-1),
            F.softmax(teacher / temperature, dim=-1),
            reduction="batchmean",
        )
        * temperature**2
    )


def keep_frozen_in_bf16(trainer: pl.Trainer, frozen: Iterable[nn.Module]) -> None:
    """Store the matrix products of a decoder's frozen layers in bf16 where the run trains under bf16 autocast, which
    casts their weights to bf16 on every call anyway: half their memory, and no cast a step.

    Only what autocast casts: ``nn.Linear`` and GPT-2's ``Conv1D`` (an ``addmm``). Norms keep fp32 weights, as
    autocast runs them in fp32: a LayerNorm given fp32 input and bf16 weights fails on the CPU ("mixed dtype"), so
    GPT-2 could not train. The embeddings keep the residual stream in fp32 (a layer adds its bf16 output to it in
    fp32), so the results are autocast's own."""
    if str(trainer.precision).startswith("bf16"):
        for layers in frozen:
            for module in layers.modules():
                if isinstance(module, AUTOCAST_MATRIX_PRODUCTS):
                    module.to(torch.bfloat16)


class TeacherLogits:
    """The frozen teacher's logits for each training row, computed the first time the row is seen.

    The teacher is in eval mode and never trained, so a row's logits never change: vanilla KD needs one teacher
    forward per row, not one per row per epoch. On sst2_quick (4,000 rows, 600 steps of 32: 4.8 epochs) that removes
    about four fifths of the teacher's passes. A row is known by its unpadded inputs (every model input, trimmed by
    the attention mask), so any sampler, batch composition and resume finds it again; only the unknown rows of a
    batch go through the teacher. Held in memory for the run: a few floats a row. A language model's logits are a
    vocabulary's worth per token (SmolLM2: 25 MB a window of 128 tokens), too many to keep: they are computed for
    every batch and never remembered.
    """

    def __init__(self, teacher: Callable[..., Any]) -> None:
        self.teacher = teacher
        self.known: dict[bytes, torch.Tensor] = {}

    def __call__(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        keys = row_keys(inputs)
        unknown = [i for i, key in enumerate(keys) if key not in self.known]
        if unknown:
            with torch.no_grad():
                logits = self.teacher(**{name: value[unknown] for name, value in inputs.items()}).logits
            if logits.dim() == 3:  # a language model's: per token, not remembered (unknown is then every row)
                return logits
            self.known.update(zip([keys[i] for i in unknown], logits, strict=True))
        return torch.stack([self.known[key] for key in keys])


def row_keys(inputs: Mapping[str, torch.Tensor]) -> list[bytes]:
    """Each row's identity: the bytes of its inputs at the positions its attention mask keeps."""
    cpu = {name: value.cpu() for name, value in inputs.items()}
    keep = cpu["attention_mask"].bool() if "attention_mask" in cpu else None
    return [
        b"".join((value[row] if keep is None else value[row][keep[row]]).numpy().tobytes() for value in cpu.values())
        for row in range(len(cpu["input_ids"]))
    ]


@contextmanager
def frozen_call(model: nn.Module) -> Iterator[None]:
    """Run ``model`` as a teacher: in eval mode (no dropout: fixed soft targets) and without gradients, each
    submodule's train or eval mode restored afterwards, exactly as it was.

    A teacher is put in eval mode only for its calls, never kept there: Lightning warns at the start of every fit
    about each module it finds in eval mode (hundreds for a decoder teacher), which a frozen teacher is on purpose."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for module, training in modes:
            module.training = training


class FrozenTeacher:
    """A frozen model's outputs, called as a teacher (:func:`frozen_call`)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __call__(self, **inputs: torch.Tensor) -> Any:
        with frozen_call(self.model):
            return self.model(**inputs)


class PredecessorTeacher(FrozenTeacher):
    """The predecessor inside a :class:`~theseus_pl.core.replacing.TheseusModel` as a teacher: every module runs its
    predecessor layers (:func:`frozen_call`)."""

    model: TheseusModel

    def __call__(self, **inputs: torch.Tensor) -> Any:
        with frozen_call(self.model):
            return self.model([False] * self.model.num_modules, **inputs)
