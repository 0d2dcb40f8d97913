"""Zero-shot classification by a causal LM: which answer word it finds likelier right after a fixed prompt.

Held-out perplexity says how well a compressed LM predicts text; it does not say whether what the predecessor could
*do* with that text survived. SST-2 sentiment scored zero-shot is a cheap check of that: the prompt below puts
SmolLM2-135M-Instruct well above chance (a prompt that asks "Is the following review positive or negative?" does
not: it answers "negative" to nearly every review).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerBase

SST2_PROMPT = "Review: {text}\nSentiment (positive or negative):"
SST2_ANSWERS = (" negative", " positive")  # for labels 0 and 1; the first token of each is compared


def answer_tokens(tokenizer: PreTrainedTokenizerBase, answers: Sequence[str]) -> list[int]:
    """The first token of each answer word: what the model's next-token logits are compared on."""
    ids = [tokenizer(answer, add_special_tokens=False)["input_ids"][0] for answer in answers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"The answers {list(answers)} start with the same token; give answers that differ at once.")
    return ids


def _right_padded(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Prompts padded on the right: under a causal mask the last real token never sees the padding."""
    longest = max(len(row["input_ids"]) for row in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row["input_ids"])] = torch.tensor(row["input_ids"])
        mask[i, : len(row["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([row["label"] for row in rows])}


class _ZeroShot(pl.LightningModule):
    """Validation only: counts the prompts whose likelier answer token is the label's."""

    def __init__(self, model: nn.Module, answers: list[int]) -> None:
        super().__init__()
        self.model, self.answers = model, answers
        self.correct = self.total = 0

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        logits = self.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
        ).logits
        last = batch["attention_mask"].sum(dim=1) - 1
        scores = logits[torch.arange(len(last)), last][:, self.answers]
        self.correct += int((scores.argmax(dim=-1) == batch["labels"]).sum())
        self.total += len(last)


def zero_shot_accuracy(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    labels: Sequence[int],
    settings: dict[str, Any],
    prompt: str = SST2_PROMPT,
    answers: Sequence[str] = SST2_ANSWERS,
    batch_size: int = 16,
) -> float:
    """Share of ``texts`` whose label's answer (``answers[label]``) is the likelier next token after ``prompt``
    filled with the text; ``settings`` are the Trainer's (accelerator, precision)."""
    if len(texts) != len(labels) or not texts:
        raise ValueError(f"Give as many labels as texts, at least one: {len(texts)} texts, {len(labels)} labels.")
    rows = [
        {"input_ids": tokenizer(prompt.format(text=text.strip()))["input_ids"], "label": int(label)}
        for text, label in zip(texts, labels, strict=True)
    ]
    scorer = _ZeroShot(model, answer_tokens(tokenizer, answers))
    trainer = pl.Trainer(**settings, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    with torch.no_grad():
        trainer.validate(scorer, DataLoader(rows, batch_size=batch_size, collate_fn=_right_padded), verbose=False)
    return scorer.correct / scorer.total
