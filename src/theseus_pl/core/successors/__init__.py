"""Successor modules: the paper's copied layer, narrower feed-forward and hidden widths, a factory of one's own, and
the measurements on the predecessor that start them (``activity``, ``hidden_basis``)."""

from theseus_pl.core.successors.blocks import FeedForwardBlock, feed_forward_block
from theseus_pl.core.successors.copied import Importance, copied_layer
from theseus_pl.core.successors.factory import successor_factory
from theseus_pl.core.successors.narrow_width import NarrowWidthSuccessor
from theseus_pl.core.successors.protocol import Reshaping, RunAware, SuccessorFactory

__all__ = [
    "FeedForwardBlock",
    "Importance",
    "NarrowWidthSuccessor",
    "Reshaping",
    "RunAware",
    "SuccessorFactory",
    "copied_layer",
    "feed_forward_block",
    "successor_factory",
]
