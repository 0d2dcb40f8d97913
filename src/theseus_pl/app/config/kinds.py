"""The kinds of run, by the names the config (``data.kind``) and every ``results.json`` (``kind``) give them; what
each kind brings is registered once (:mod:`~theseus_pl.app.results.registry`)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

TASK_MODEL = "task_model"  # a classifier or regressor (an encoder) compressed on a task
LANGUAGE_MODEL = "language_model"  # a decoder LM compressed on text
EMBEDDING_MODEL = "embedding_model"  # a sentence-transformers model compressed to its own sentence vectors
KIND_KEY = "kind"  # data.kind: the kind of run, which the app reads; no data module takes it


def data_module_settings(data: DictConfig) -> dict[str, Any]:
    """The data group as its data module is built from it (``instantiate``): resolved, without ``data.kind``, which
    names the kind of run for the app (a kind of your own on the task model's data: ``+data.kind=NAME``)."""
    settings: dict[str, Any] = OmegaConf.to_container(data, resolve=True)  # type: ignore[assignment]  # a mapping
    settings.pop(KIND_KEY, None)
    return settings
