"""The Hydra-facing sweeper class of theseus_pl's search; the search itself is ``theseus_pl.app.search.sweeper``."""

from __future__ import annotations

from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class SearchSweeper(Sweeper):
    """``hydra.sweeper`` of ``+search=...``: its settings are the search's (``theseus_pl.app.search.settings``)."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.search: Any = None  # theseus_pl.app.search.sweeper.Search, made by setup()

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from theseus_pl.app.search.sweeper import Search

        self.hydra_context, self.config = hydra_context, config  # what validate_batch_is_legal reads
        self.search = Search(self.settings, hydra_context=hydra_context, task_function=task_function, config=config,
                             validate=self.validate_batch_is_legal)  # fmt: skip

    def sweep(self, arguments: list[str]) -> Any:
        return self.search.sweep(arguments)
