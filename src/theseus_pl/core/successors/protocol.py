"""What the replacing model asks of a successor module, beyond being called like a predecessor layer.

A successor is any ``nn.Module`` called as the layer it replaces and returning hidden states of the shape it was
given. Two optional abilities, checked structurally (``isinstance`` on these protocols), let a successor take part
in more than that without the replacing model knowing its class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from torch import nn
from transformers import PretrainedConfig

# factory(module_layers, source_layer, predecessor_config) -> successor module
SuccessorFactory = Callable[[Sequence[nn.Module], nn.Module, PretrainedConfig], nn.Module]


@runtime_checkable
class RunAware(Protocol):
    """A successor that must know where its run of consecutive successors begins and ends, as the narrower-width
    successor projects down where a run begins and up where it ends. ``TheseusModel.set_gate`` tells every such
    successor at each gate: ``enters`` when the module before it runs its predecessor (or it is the first),
    ``leaves`` when the module after it does (or it is the last)."""

    def place_in_run(self, enters: bool, leaves: bool) -> None: ...


@runtime_checkable
class Reshaping(Protocol):
    """A successor whose compact model's config must say more than its layer count: the config attributes it
    changes, given the predecessor's config (a plain layer's narrower feed-forward width is read without this)."""

    def compact_config_changes(self, config: PretrainedConfig) -> dict[str, int]: ...
