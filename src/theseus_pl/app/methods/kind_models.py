"""What a kind of run gives every method to build from (:class:`~theseus_pl.app.methods.method.MethodInputs`'
``models``): how its predecessor loads, what scores it, how Theseus splits it into replaceable modules and what the
truncation baselines keep of it. A task model's and a decoder LM's are here, a sentence-embedding model's in its
kind's folder; a kind of your own subclasses :class:`KindModels`, so that no method asks which kind it compresses."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn
from transformers import PreTrainedModel

from theseus_pl.app.predecessors.classifier import load_classifier
from theseus_pl.core.decoders import load_causal_lm
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import keep_layers
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors import SuccessorFactory
from theseus_pl.data.tasks import TaskSpec
from theseus_pl.lightning.embedding_metrics import EmbeddingMetrics, PairScoreMetrics
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics
from theseus_pl.lightning.metrics import TaskMetrics


class KindModels:
    """The models of one kind of run, as methods build on them."""

    def metrics(self) -> TaskMetrics | LanguageModelMetrics | EmbeddingMetrics | PairScoreMetrics:
        """What scores its models (the LightningModule's validation)."""
        raise NotImplementedError

    def predecessor(self, directory: str) -> PreTrainedModel:
        """The model whose layers are compressed, from its folder."""
        raise NotImplementedError

    def replaceable(
        self,
        predecessor: PreTrainedModel,
        successor_layers: int,
        sources: str | list[int],
        layers_path: str | None,
        factory: SuccessorFactory,
    ) -> TheseusModel:
        """Theseus's model of ``predecessor``: its layers split into modules, each with its successor."""
        return TheseusModel(predecessor, successor_layers, sources, layers_path, factory)

    def truncated(
        self, predecessor: PreTrainedModel, successor_layers: int, init: str, layers_path: str | None
    ) -> nn.Module:
        """The predecessor's ``successor_layers`` layers that ``init`` names, as the truncation baselines' student."""
        raise NotImplementedError

    def with_new_head(self, directory: str) -> PreTrainedModel:
        """Another run's successor in ``directory`` with a new head for this run (intermediate-task transfer)."""
        raise NotImplementedError(f"{type(self).__name__}: no new head for another run's successor")

    def truncation_keeps(self, init: str) -> str:
        """The layers :meth:`truncated` keeps, in ``theseus.init``'s words, as the run records them: ``init``'s."""
        return init


@dataclass(frozen=True)
class TaskModels(KindModels):
    """A task model's: a classifier or regressor with the task's head, loss and metrics. Its truncation trains every
    parameter of the kept layers (the paper's "Fine-tuning")."""

    task: TaskSpec

    def metrics(self) -> TaskMetrics:
        return TaskMetrics.for_task(self.task)

    def predecessor(self, directory: str) -> PreTrainedModel:
        return load_classifier(directory, self.task)

    def truncated(
        self, predecessor: PreTrainedModel, successor_layers: int, init: str, layers_path: str | None
    ) -> nn.Module:
        return TheseusModel(predecessor, successor_layers, init, layers_path).to_compact_model()

    def with_new_head(self, directory: str) -> PreTrainedModel:
        return load_classifier(directory, self.task, new_head=True)


class LanguageModels(KindModels):
    """A decoder LM's: next-token loss and perplexity. Its truncation keeps the bottom layers (the layer-choosing
    methods are ShortGPT's) and trains only the decoder layers, embeddings, final norm and head staying the
    predecessor's as Theseus keeps them."""

    def metrics(self) -> LanguageModelMetrics:
        return LanguageModelMetrics()

    def predecessor(self, directory: str) -> PreTrainedModel:
        return load_causal_lm(directory).eval()

    def truncated(
        self, predecessor: PreTrainedModel, successor_layers: int, init: str, layers_path: str | None
    ) -> nn.Module:
        return layers_only(keep_layers(predecessor, list(range(successor_layers)), layers_path), layers_path)

    def truncation_keeps(self, init: str) -> str:
        return "bottom"  # whatever theseus.init says


def layers_only(model: PreTrainedModel, layers_path: str | None) -> PreTrainedModel:
    """``model`` with only its layer stack trainable: embeddings, final norm and head stay as they are."""
    model.requires_grad_(False)
    find_layer_stack(model, layers_path).layers.requires_grad_(True)
    return model
