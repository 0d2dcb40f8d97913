"""The kinds of run theseus_pl ships, each registered once (:func:`~theseus_pl.app.results.registry.register_kind`):
a task model, a decoder LM and a sentence-embedding model, in this order (the report's and the dashboard's). The
registry imports this package by its name the first time a kind is looked up; a kind of your own registers the same
way, from your code, after these."""

from theseus_pl.app.kinds import embedding_model, language_model, task_model
from theseus_pl.app.results.registry import register_kind

for module in (task_model, language_model, embedding_model):
    register_kind(module.KIND)
