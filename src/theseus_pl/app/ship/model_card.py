"""The exported successor's ``README.md``: a Hugging Face model card that can be published as it is, written for each
kind of run by the writer its kind registered (:mod:`~theseus_pl.app.results.registry`): a task model's in
:mod:`~theseus_pl.app.kinds.task_model.card`, a decoder LM's in :mod:`~theseus_pl.app.kinds.language_model.card`, a
sentence-embedding model's in :mod:`~theseus_pl.app.kinds.embedding_model.card`. Each builds its YAML header with
``huggingface_hub``, so the hub parses and displays it, from ``results.json`` alone.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import ModelCard

from theseus_pl.app.results.envelope import RunRecord, for_kind
from theseus_pl.app.results.registry import parts


def write_model_card(directory: Path, results: RunRecord, repo_id: str | None = None) -> Path:
    path = directory / "README.md"
    model_card(results, repo_id).save(path)
    return path


def model_card(results: RunRecord, repo_id: str | None = None) -> ModelCard:
    """The card of a run's successor, written by the writer its kind registered; ``repo_id`` (``ORG/NAME``) once it
    is published, for its code to load from. A kind with no writer is refused in one line
    (:class:`~theseus_pl.app.results.envelope.UnknownKind`)."""
    return for_kind(parts("card"), results, "the model card")(results, repo_id)
