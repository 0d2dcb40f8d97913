"""The paper's baselines (Table 2): knowledge distillation, BERT-PKD and LayerDrop, model-agnostic.

Plain "Fine-tuning" (the bottom ``n`` layers of the predecessor, every parameter trained) needs nothing beyond
:class:`~theseus_pl.lightning.modules.FineTuningModule` on a truncated copy of the predecessor.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from theseus_pl.core.decoders import is_decoder
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import module_layer_ranges
from theseus_pl.core.settings import Rule, check_fields, number
from theseus_pl.lightning.distillation import (
    SOFT_TARGET_RULES,
    FrozenTeacher,
    TeacherLogits,
    distillation_loss,
    keep_frozen_in_bf16,
)
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.modules import Batch, ClassifierModule
from theseus_pl.lightning.step_logging import log_training_loss

# The baselines' own settings, checked by the modules that take them (and by the app before a run starts).
PATIENT_RULES = {
    **SOFT_TARGET_RULES,
    "beta": Rule(lambda v: number(v) and v >= 0, "a number, at least 0 (0: vanilla KD)"),
}
LAYERDROP_RULES = {"drop_rate": Rule(lambda v: number(v) and 0 <= v < 1, "a number in [0, 1)")}


def patient_loss(student_cls: list[torch.Tensor], teacher_cls: list[torch.Tensor]) -> torch.Tensor:
    """BERT-PKD's patient loss: squared distance between L2-normalised [CLS] states of matched layers."""
    return sum(
        (F.normalize(s, dim=-1) - F.normalize(t, dim=-1)).pow(2).sum(-1).mean()
        for s, t in zip(student_cls, teacher_cls, strict=True)
    )


class DistillationModule(ClassifierModule):
    """Vanilla KD (``beta = 0``) or BERT-PKD (``beta > 0``) from a frozen teacher into a student.

    Loss: ``alpha · KD + (1 - alpha) · task loss + beta · patient loss``. The patient loss (PKD-skip) matches
    student layer ``j`` (``j = 1 … n - 1``) with the teacher layer that ends module ``j`` when the teacher's
    ``L`` layers are split into ``n`` modules (every other layer for 12 → 6).
    """

    def __init__(
        self,
        student: PreTrainedModel,
        teacher: PreTrainedModel,
        metrics: TaskMetrics | None = None,
        alpha: float = 0.5,
        temperature: float = 10.0,
        beta: float = 0.0,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.0,
    ) -> None:
        super().__init__(student, metrics, lr=lr, weight_decay=weight_decay, warmup_ratio=warmup_ratio)
        check_fields({"alpha": alpha, "temperature": temperature, "beta": beta}, PATIENT_RULES)
        self.save_hyperparameters("alpha", "temperature", "beta")
        self.teacher = teacher.requires_grad_(False)  # called through frozen_call: in eval mode, no gradients
        student_layers = len(find_layer_stack(student).layers)
        teacher_layers = len(find_layer_stack(teacher).layers)
        self.teacher_layers = [r.stop for r in module_layer_ranges(teacher_layers, student_layers)][:-1]
        # Vanilla KD needs only the teacher's logits, remembered per row; PKD also needs its hidden states, which
        # would cost hidden_size floats per matched layer and row to keep, so it runs the teacher on every batch.
        self.teacher_logits = TeacherLogits(FrozenTeacher(self.teacher)) if beta == 0 else None

    def on_fit_start(self) -> None:
        super().on_fit_start()
        if is_decoder(self.teacher):
            keep_frozen_in_bf16(self.trainer, [find_layer_stack(self.teacher).layers])

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        patient = self.hparams.beta > 0
        student = self.model(**batch, output_hidden_states=patient)
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        if self.teacher_logits is not None:
            teacher_logits = self.teacher_logits(inputs)
        else:
            teacher = FrozenTeacher(self.teacher)(**inputs, output_hidden_states=patient)
            teacher_logits = teacher.logits
        soft = distillation_loss(student.logits, teacher_logits, self.hparams.temperature, batch["labels"])
        loss = self.hparams.alpha * soft
        loss = loss + (1 - self.hparams.alpha) * student.loss
        if patient:
            student_cls = [h[:, 0] for h in student.hidden_states[1:-1]]
            teacher_cls = [teacher.hidden_states[i][:, 0] for i in self.teacher_layers]
            loss = loss + self.hparams.beta * patient_loss(student_cls, teacher_cls)
        log_training_loss(self, loss, len(batch["input_ids"]))
        return loss


class DroppableLayer(nn.Module):
    """LayerDrop (Fan et al., 2020): in training, skip the whole layer for the batch with probability ``rate``."""

    def __init__(self, layer: nn.Module, rate: float) -> None:
        super().__init__()
        self.layer = layer
        self.rate = rate
        self.returns_tuple: bool | None = None  # learnt from the first call, to skip in the layer's own format

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        skip = self.training and self.returns_tuple is not None and float(torch.rand(())) < self.rate
        if skip:
            return (hidden_states, None) if self.returns_tuple else hidden_states
        output = self.layer(hidden_states, *args, **kwargs)
        self.returns_tuple = isinstance(output, tuple)
        return output


def add_layerdrop(model: PreTrainedModel, drop_rate: float, layers_path: str | None = None) -> None:
    """Wrap each layer of ``model`` to be skipped with probability ``drop_rate`` in training."""
    check_fields({"drop_rate": drop_rate}, LAYERDROP_RULES)
    stack = find_layer_stack(model, layers_path)
    setattr(stack.parent, stack.attribute, nn.ModuleList(DroppableLayer(layer, drop_rate) for layer in stack.layers))


def remove_layerdrop(model: PreTrainedModel, layers_path: str | None = None) -> None:
    stack = find_layer_stack(model, layers_path)
    setattr(stack.parent, stack.attribute, nn.ModuleList(wrapper.layer for wrapper in stack.layers))
