"""LightningModules: plain fine-tuning (the predecessor and baselines) and Theseus compression."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.schedules import ReplacementSchedule
from theseus_pl.core.settings import check_fields
from theseus_pl.data.tasks import TaskSpec, head_label_problem
from theseus_pl.lightning.callbacks import replacement_callbacks
from theseus_pl.lightning.distillation import (
    SOFT_TARGET_RULES,
    FrozenTeacher,
    PredecessorTeacher,
    TeacherLogits,
    distillation_loss,
    keep_frozen_in_bf16,
)
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.metrics import TaskMetrics
from theseus_pl.lightning.optim import adamw_with_linear_schedule
from theseus_pl.lightning.step_logging import log_step_number, log_training_loss

Batch = dict[str, torch.Tensor]


def monitorable(logged: Iterable[str]) -> tuple[str, ...]:
    """What a callback that acts at validation (a best checkpoint, early stopping) can monitor in a
    :class:`ClassifierModule` scored by metrics that give ``logged``: their values and the loss under ``val/``, and
    the last step's ``train/loss`` (the other ``train/`` values are logged only on logging steps)."""
    return ("val/loss", *(f"val/{name}" for name in logged), "train/loss")


class ClassifierModule(pl.LightningModule):
    """What both training modes share: evaluation, prediction and the optimizer.

    ``model`` is called with the batch's keyword arguments (``input_ids``, ``attention_mask``, …, ``labels``)
    and returns a Hugging Face output with ``loss`` and ``logits``. Only parameters that require grad are
    optimised. Validation logs every component of ``metrics`` under ``val/<name>``, its headline (``val/score`` for a
    task, ``val/perplexity`` for a language model's :class:`LanguageModelMetrics`) in the progress bar. A causal
    language model trains and validates the same way, on windows whose ``labels`` are its ``input_ids``. Without
    ``metrics``, trained on a data module that has a ``task`` (``TextTaskDataModule``), the
    metrics are that task's (accuracy for a classification of your own), and the model's label names become the
    task's, so the exported model names its classes as the data does.
    """

    def __init__(
        self,
        model: nn.Module,
        metrics: TaskMetrics | LanguageModelMetrics | None = None,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.0,
    ) -> None:
        super().__init__()
        # By name: saving every init argument would also pickle models (a student's teacher, say) into checkpoints.
        self.save_hyperparameters("lr", "weight_decay", "warmup_ratio")
        self.model = model
        self.metrics = metrics

    def forward(self, **batch: torch.Tensor) -> Any:
        return self.model(**batch)

    def setup(self, stage: str) -> None:
        task = getattr(self.trainer.datamodule, "task", None)
        if not isinstance(task, TaskSpec):
            return
        if self.metrics is None:
            self.metrics = TaskMetrics.for_task(task)
        config = getattr(self.model, "config", None)  # a Hugging Face model's (or TheseusModel's); else no names
        if config is None:
            return
        problem = head_label_problem(config.id2label, task)
        if problem:
            raise ValueError(f"The model does not fit the data module's task {task.name}: {problem}.")
        if not task.is_regression:
            config.id2label = dict(enumerate(task.label_names))
            config.label2id = {name: i for i, name in config.id2label.items()}

    def on_fit_start(self) -> None:
        # from_pretrained returns models in eval mode and Lightning keeps each module's mode: without this,
        # training would run with dropout off.
        self.train()

    def validation_step(self, batch: Batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        output = self(**batch)
        self.log("val/loss", output.loss, prog_bar=True, batch_size=len(batch["input_ids"]))
        if self.metrics is not None:
            more_sets = {"eval_index": dataloader_idx} if dataloader_idx else {}  # MNLI's mismatched dev set
            self.metrics.update(output.logits, batch["labels"], **more_sets)

    def on_validation_epoch_end(self) -> None:
        if self.metrics is not None:
            values = self.metrics.compute()
            headline = self.metrics.headline
            self.log(f"val/{headline}", values.pop(headline), prog_bar=True)
            self.log_dict({f"val/{name}": value for name, value in values.items()})
            self.metrics.reset()

    def predict_step(self, batch: Batch, batch_idx: int, dataloader_idx: int = 0) -> torch.Tensor:
        batch = {key: value for key, value in batch.items() if key != "labels"}
        return self(**batch).logits

    def configure_gradient_clipping(
        self,
        optimizer: torch.optim.Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip as Lightning does, also for the fused CPU AdamW under ``bf16-mixed``: Lightning refuses to clip a
        fused optimizer's gradients under any mixed precision, for fear of the gradient scaler of ``16-mixed``; bf16
        has no scaler, so the gradients are the true ones and are clipped here."""
        if gradient_clip_val and str(self.trainer.precision) == "bf16-mixed":
            parameters = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
            if gradient_clip_algorithm == "value":
                nn.utils.clip_grad_value_(parameters, gradient_clip_val)
            else:
                nn.utils.clip_grad_norm_(parameters, gradient_clip_val)
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def trainable_parameters(self) -> Iterable[nn.Parameter]:
        """What the optimizer may update (of these, the ones that require grad)."""
        return self.model.parameters()

    def lr_restarts(self) -> list[int]:
        """Steps where the learning rate's linear decay starts again from the full rate: none here."""
        return []

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer, scheduler = adamw_with_linear_schedule(
            self.trainable_parameters(),
            lr=self.hparams.lr,
            weight_decay=self.hparams.weight_decay,
            warmup_ratio=self.hparams.warmup_ratio,
            total_steps=int(self.trainer.estimated_stepping_batches),
            restarts=self.lr_restarts(),
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class FineTuningModule(ClassifierModule):
    """Trains every parameter of a sequence-classification model on the task loss."""

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        loss = self(**batch).loss
        log_training_loss(self, loss, len(batch["input_ids"]))
        return loss


class TheseusModule(ClassifierModule):
    """Progressive module replacing: a fresh gate per batch, only successor layers trained.

    The replacement rate ``p`` is set before each batch by
    :class:`~theseus_pl.lightning.callbacks.ReplacementScheduler`: given ``schedule``, the module adds it (and
    the phase switch) to the Trainer itself; without, the Trainer's callbacks must hold them
    (:func:`~theseus_pl.lightning.callbacks.replacement_callbacks`).
    Each module is replaced independently with probability ``p``, drawn once per batch from a generator seeded
    with ``seed`` and saved in checkpoints, so a resumed run draws the same gates. Validation and prediction
    use every successor.

    Two departures from the paper, for ablations: ``shared_trainable_from`` makes the parts the successor shares
    with the predecessor (embeddings, pooler, task head) train too from that optimizer step on (the switch to
    successor fine-tuning), and ``lr_restart_step`` restarts the linear decay of the learning rate at that step
    instead of running one decay over both phases as the authors' code does.

    ``alpha > 0`` goes beyond the paper (which calls Theseus orthogonal to KD): the loss becomes ``alpha · KD(T) +
    (1 - alpha) · task loss``, the soft targets being the predecessor's own logits at ``temperature``, computed once
    per training row (the predecessor is the model's all-predecessor path, frozen), or ``teacher``'s where one is
    given (a decoder LM's predecessor adapted to the training text: frozen, in eval mode). ``alpha = 0`` is the
    paper's Theseus exactly, and never runs a teacher.

    ``reference_mode=True`` trains the same way but does the work the authors' code does: every parameter
    requires grad, every gradient is computed (and then left unused), and a batch that replaces nothing still
    runs forward and backward. It exists so that benchmarks can measure what skipping that work saves and tests
    can check that skipping it changes no successor gradient.
    """

    model: TheseusModel

    def __init__(
        self,
        model: TheseusModel,
        metrics: TaskMetrics | LanguageModelMetrics | None = None,
        lr: float = 2e-5,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.0,
        schedule: ReplacementSchedule | None = None,
        seed: int = 42,
        reference_mode: bool = False,
        shared_trainable_from: int | None = None,
        lr_restart_step: int | None = None,
        alpha: float = 0.0,
        temperature: float = 1.0,
        teacher: nn.Module | None = None,
    ) -> None:
        super().__init__(model, metrics, lr=lr, weight_decay=weight_decay, warmup_ratio=warmup_ratio)
        check_fields({"alpha": alpha, "temperature": temperature}, SOFT_TARGET_RULES)
        if teacher is not None and alpha == 0:
            raise ValueError(
                "A teacher is given but alpha=0, which trains on the task loss alone and never runs it: give alpha "
                "above 0 to learn from its soft targets, or leave teacher out."
            )
        self.save_hyperparameters(
            "seed", "reference_mode", "shared_trainable_from", "lr_restart_step", "alpha", "temperature"
        )
        if reference_mode and shared_trainable_from is not None:
            raise ValueError(
                "reference_mode trains with every gradient computed, so the embeddings and head would be updated "
                "before shared_trainable_from; use one or the other."
            )
        self.schedule = schedule
        self.reference_mode = reference_mode
        self.shared_trainable_from = shared_trainable_from
        self.lr_restart_step = lr_restart_step
        if reference_mode:
            model.requires_grad_(True)
        self.gate_generator = torch.Generator().manual_seed(seed)
        self.teacher = teacher.requires_grad_(False) if teacher is not None else None
        soft_targets = FrozenTeacher(self.teacher) if self.teacher is not None else PredecessorTeacher(model)
        self.teacher_logits = TeacherLogits(soft_targets) if alpha > 0 else None
        self.replacement_rate: float | None = None
        self.last_gate: torch.Tensor | None = None
        self._discard_gradients = False
        self._without_gradient: list[nn.Parameter] = []

    def configure_callbacks(self) -> list[pl.Callback]:
        return replacement_callbacks(self.schedule) if self.schedule is not None else []

    def on_fit_start(self) -> None:
        super().on_fit_start()
        if self.model.decoder and not self.reference_mode:  # the predecessor's layers and any teacher's, frozen
            frozen = [block.predecessor for block in self.model.blocks]
            if self.teacher is not None:
                frozen.append(find_layer_stack(self.teacher).layers)
            keep_frozen_in_bf16(self.trainer, frozen)

    def draw_gate(self, p: float) -> torch.Tensor:
        """One independent Bernoulli(p) draw per module (True = successor), on the CPU: no device sync."""
        return self.model.sample_gate(p, self.gate_generator)

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor | None:
        if self.replacement_rate is None:
            raise RuntimeError(
                "TheseusModule has no replacement rate: add the callbacks from "
                "theseus_pl.lightning.callbacks.replacement_callbacks(schedule) to the Trainer."
            )
        if self.shared_trainable_from is not None:  # from the step alone, so a resumed run agrees
            self.model.shared_parameters_require_grad(self.global_step >= self.shared_trainable_from)
        gate = self.last_gate = self.draw_gate(self.replacement_rate)
        replaced = int(gate.sum())
        batch_size = len(batch["input_ids"])
        log_step_number(self, "train/p", self.replacement_rate, batch_size)
        log_step_number(self, "train/replaced_modules", replaced, batch_size)
        if replaced == 0 and not self.reference_mode:
            # Only successor layers are trainable and none is in this batch's path: the loss would carry no
            # gradient. Skip forward and backward; Lightning still counts the optimizer step, so the schedule
            # and the learning rate advance as in the authors' code, while the weights stay as they are.
            if not self.backward_on_every_batch:
                return None
            # Under DDP every rank must run backward (all ranks draw the same gate, from the same seed). A zero
            # loss over the successor weights keeps them in step; on_after_backward drops the zero gradients it
            # gave, and keeps those the optimizer step's earlier micro-batches accumulated (it adds zero to them).
            self._discard_gradients = True
            return torch.stack([p.sum() for p in self.model.successor_parameters()]).sum() * 0.0
        if self.teacher_logits is None:
            loss = self.model(gate, **batch).loss
        else:  # the teacher first: it runs the model with every predecessor module, the student's gate comes next
            soft_targets = self.teacher_logits({key: value for key, value in batch.items() if key != "labels"})
            output = self.model(gate, **batch)
            alpha = self.hparams.alpha
            soft = distillation_loss(output.logits, soft_targets, self.hparams.temperature, batch["labels"])
            loss = alpha * soft + (1 - alpha) * output.loss
        log_training_loss(self, loss, batch_size)
        return loss

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The successor layers (also in reference mode, where everything requires grad), and the shared parts
        when they train in successor fine-tuning: AdamW leaves them alone while they have no gradient."""
        shared = self.model.shared_parameters() if self.shared_trainable_from is not None else []
        return self.model.successor_parameters() + shared

    def configure_optimizers(self) -> dict[str, Any]:
        if self.shared_trainable_from is not None:  # the optimizer holds only what requires grad when it is built
            self.model.shared_parameters_require_grad(True)
        configured = super().configure_optimizers()
        if self.shared_trainable_from is not None:
            self.model.shared_parameters_require_grad(self.trainer.global_step >= self.shared_trainable_from)
        return configured

    def lr_restarts(self) -> list[int]:
        return [] if self.lr_restart_step is None else [self.lr_restart_step]

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: torch.optim.Optimizer) -> None:
        if self.reference_mode:  # the frozen parts' gradients are outside the optimizer: clear them too
            self.model.zero_grad(set_to_none=True)
        else:
            optimizer.zero_grad(set_to_none=True)

    @property
    def backward_on_every_batch(self) -> bool:
        """Lightning cannot skip a batch in distributed training."""
        return self.trainer.world_size > 1

    def on_before_backward(self, loss: torch.Tensor) -> None:
        # After Lightning's zero_grad (which runs between training_step and backward): what has no gradient yet
        if self._discard_gradients:
            self._without_gradient = [p for p in self.model.successor_parameters() if p.grad is None]

    def on_after_backward(self) -> None:
        if self._discard_gradients:
            for parameter in self._without_gradient:
                parameter.grad = None  # AdamW skips parameters without a gradient: no update, no moment decay
            self._without_gradient = []
            self._discard_gradients = False

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["gate_generator_state"] = self.gate_generator.get_state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.gate_generator.set_state(checkpoint["gate_generator_state"])
