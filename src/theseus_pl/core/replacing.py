"""Progressive module replacing, independent of Lightning and of the model family.

The predecessor's layer list is replaced in place by ``n`` :class:`TheseusBlock` objects. Block ``i`` holds
predecessor module ``i`` (a run of consecutive predecessor layers) and successor module ``i`` (by default a copy
of one predecessor layer; see ``successors``), and a flag choosing which of the two runs. The model's own encoder
loop calls the blocks exactly as it called its layers, so no model code is forked: any encoder whose layers take
the hidden states as their first argument works.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from enum import StrEnum
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from theseus_pl.core.decoders import (
    check_decoder_fits,
    compact_decoder_config,
    decoder_inputs,
    is_decoder,
    renumber_layers,
)
from theseus_pl.core.families import LayerStack, family_of, find_layer_stack
from theseus_pl.core.io import save_successor
from theseus_pl.core.successors.copied import copied_layer
from theseus_pl.core.successors.protocol import Reshaping, RunAware, SuccessorFactory


class SuccessorInit(StrEnum):
    """Which predecessor layer each successor layer starts as (the paper's footnote compares these)."""

    BOTTOM = "bottom"  # layers 0..n-1, the paper's choice
    TOP = "top"  # the last n layers
    EVERY_OTHER = "every_other"  # the first layer of each module: every other layer when L = 2n


def module_sizes(num_layers: int, num_modules: int) -> list[int]:
    """Split ``num_layers`` consecutive layers into ``num_modules`` modules.

    Even split when ``num_modules`` divides ``num_layers``; otherwise the remainder goes one extra layer each
    to the bottom modules, e.g. 12 → 5 is 3, 3, 2, 2, 2.
    """
    if not 1 <= num_modules <= num_layers:
        raise ValueError(f"successor_layers={num_modules} must be between 1 and the predecessor's {num_layers} layers.")
    base, extra = divmod(num_layers, num_modules)
    return [base + 1] * extra + [base] * (num_modules - extra)


def module_layer_ranges(num_layers: int, num_modules: int) -> list[range]:
    """Predecessor layer indices held by each module, in order."""
    ranges, start = [], 0
    for size in module_sizes(num_layers, num_modules):
        ranges.append(range(start, start + size))
        start += size
    return ranges


def successor_source_layers(num_layers: int, num_modules: int, init: SuccessorInit | str) -> list[int]:
    """Index of the predecessor layer that initialises each successor layer."""
    init = SuccessorInit(init)
    if init is SuccessorInit.BOTTOM:
        return list(range(num_modules))
    if init is SuccessorInit.TOP:
        return list(range(num_layers - num_modules, num_layers))
    return [r.start for r in module_layer_ranges(num_layers, num_modules)]


def modules_around(kept: Sequence[int], num_layers: int) -> list[range]:
    """Modules formed around chosen layers: each holds one kept layer and the layers after it up to the next kept
    one (the layers before the first kept one join the first module).

    This is how a layer-removal choice (ShortGPT's most influential layers) becomes a Theseus split: the
    all-successor model then starts as exactly the model that removal gives, and replacing trains from there.
    """
    kept = list(kept)
    if not kept or sorted(set(kept)) != kept or kept[0] < 0 or kept[-1] >= num_layers:
        raise ValueError(f"kept={kept} must be ascending indices of the predecessor's {num_layers} layers.")
    bounds = [0, *kept[1:], num_layers]
    return [range(start, stop) for start, stop in pairwise(bounds)]


def module_plan(
    num_layers: int, num_modules: int, init: SuccessorInit | str | Sequence[int]
) -> tuple[list[range], list[int]]:
    """The predecessor layers of each module and the layer each successor starts as: an even split and ``init``'s
    choice within it, or, given layer indices, the modules formed around them (:func:`modules_around`)."""
    if isinstance(init, str):
        return module_layer_ranges(num_layers, num_modules), successor_source_layers(num_layers, num_modules, init)
    if len(init) != num_modules:
        raise ValueError(f"init names {len(init)} layers for successor_layers={num_modules}.")
    return modules_around(init, num_layers), list(init)


class TheseusBlock(nn.Module):
    """One module: either its predecessor layers in sequence, or its successor module.

    Called with the same arguments the encoder passes to a layer. A layer may return a tensor or a tuple whose
    first element is the hidden states; the block returns whatever its last layer returned.
    """

    def __init__(self, predecessor: Sequence[nn.Module], successor: nn.Module) -> None:
        super().__init__()
        self.predecessor = nn.ModuleList(predecessor)
        self.successor = successor
        self.use_successor = True

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.use_successor:
            return self.successor(hidden_states, *args, **kwargs)
        output: Any = hidden_states
        for layer in self.predecessor:
            output = layer(hidden_states, *args, **kwargs)
            hidden_states = output[0] if isinstance(output, tuple) else output
        return output


class TheseusModel(nn.Module):
    """A fine-tuned sequence-classification model whose layer stack is split into replaceable modules.

    Takes ownership of ``predecessor`` (it is modified in place, not copied, so a 12-layer model is not held
    twice). Every parameter is frozen except the successor modules: predecessor layers, embeddings and task
    head keep the fine-tuned weights, as in the paper. ``factory`` builds each successor module from its
    predecessor module and the layer ``init`` names (default: a copy of that layer); ``init`` may instead list the
    layers the successors start as, the modules then formed around them (:func:`module_plan`).
    """

    def __init__(
        self,
        predecessor: PreTrainedModel,
        successor_layers: int,
        init: SuccessorInit | str | Sequence[int] = SuccessorInit.BOTTOM,
        layers_path: str | None = None,
        factory: SuccessorFactory = copied_layer,
    ) -> None:
        super().__init__()
        stack = find_layer_stack(predecessor, layers_path)
        _reject_unsupported(predecessor, stack)
        self.decoder = is_decoder(predecessor)
        if self.decoder:
            check_decoder_fits(predecessor.config)
        layers = list(stack.layers)
        ranges, sources = module_plan(len(layers), successor_layers, init)
        blocks = []
        for layer_range, source in zip(ranges, sources, strict=True):
            module_layers = [layers[j] for j in layer_range]
            blocks.append(TheseusBlock(module_layers, factory(module_layers, layers[source], predecessor.config)))
        if self.decoder:  # cache indices after the predecessor's: no successor shares a predecessor layer's
            renumber_layers((block.successor for block in blocks), start=len(layers))
        given_layers = stack.layers
        trainable = {name: parameter.requires_grad for name, parameter in predecessor.named_parameters()}
        setattr(stack.parent, stack.attribute, nn.ModuleList(blocks))

        self.model = predecessor
        self.layers_path = stack.path
        self.predecessor_layers = len(layers)
        self.module_ranges = ranges
        self.successor_sources = sources
        self.model.requires_grad_(False)
        for block in blocks:
            block.successor.requires_grad_(True)
        try:
            check_successors_fit(self, getattr(factory, "__name__", None) or repr(factory))
        except ValueError:  # the caller's predecessor as it was given, to wrap again with another factory
            setattr(stack.parent, stack.attribute, given_layers)
            for name, parameter in predecessor.named_parameters():
                parameter.requires_grad_(trainable[name])
            raise

    @property
    def config(self) -> PretrainedConfig:
        """The wrapped model's config: its label names and task are the exported successor's."""
        return self.model.config

    @property
    def blocks(self) -> nn.ModuleList:
        return self.model.get_submodule(self.layers_path)

    @property
    def num_modules(self) -> int:
        return len(self.module_ranges)

    def successor_parameters(self) -> list[nn.Parameter]:
        """Each trainable successor parameter once, though narrow-width successors share their projections."""
        unique = {id(p): p for block in self.blocks for p in block.successor.parameters()}
        return list(unique.values())

    def shared_parameters(self) -> list[nn.Parameter]:
        """What the successor shares with the predecessor: everything outside the layer stack (embeddings,
        pooler, task head), found by exclusion so that it holds for every family."""
        in_blocks = {id(p) for p in self.blocks.parameters()}
        return [p for p in self.model.parameters() if id(p) not in in_blocks]

    def shared_parameters_require_grad(self, trainable: bool) -> None:
        for parameter in self.shared_parameters():
            parameter.requires_grad_(trainable)

    def set_gate(self, gate: Sequence[bool] | torch.Tensor | None) -> None:
        """Choose per module: True runs the successor layer, False the predecessor layers; None is all successors."""
        if gate is None:
            gate = [True] * self.num_modules
        elif isinstance(gate, torch.Tensor):
            if gate.dim() != 1:
                raise ValueError(f"The gate must be a 1-D vector, got shape {tuple(gate.shape)}.")
            gate = gate.tolist()
        if len(gate) != self.num_modules:
            raise ValueError(
                f"The gate has {len(gate)} entries but the model has {self.num_modules} modules; "
                "give one bool per module (True = successor)."
            )
        gate = [bool(use_successor) for use_successor in gate]
        for index, block in enumerate(self.blocks):
            block.use_successor = gate[index]
            if isinstance(block.successor, RunAware):  # where its run of successors begins and ends
                enters = index == 0 or not gate[index - 1]
                block.successor.place_in_run(enters, index == len(gate) - 1 or not gate[index + 1])

    def sample_gate(self, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
        """The paper's gate for one batch: each module replaced independently with probability ``p`` (True = its
        successor), drawn on the CPU from ``generator`` (no device sync)."""
        return torch.rand(self.num_modules, generator=generator) < p

    def forward(self, gate: Sequence[bool] | torch.Tensor | None = None, **inputs: Any) -> Any:
        """Run the wrapped model with ``gate`` (None: every module uses its successor, as at inference)."""
        self._refuse_per_layer_outputs(inputs)
        if self.decoder:
            inputs = decoder_inputs(inputs, self.training)
        self.set_gate(gate)
        return self.model(**inputs)

    def _refuse_per_layer_outputs(self, inputs: dict[str, Any]) -> None:
        """Per-layer outputs would count every inner predecessor layer, so their number would follow the gate.

        Hugging Face models record hidden states and attentions at each layer of the layer's class, and a
        predecessor module holds several such layers while its successor holds one: rather than outputs whose
        meaning changes from batch to batch, a clear refusal.
        """
        for name in ("output_hidden_states", "output_attentions"):
            if inputs.get(name, getattr(self.model.config, name, False)):
                raise ValueError(
                    f"{name}=True is not supported on a TheseusModel: a predecessor module holds several layers "
                    "and its successor one, so the number of per-layer outputs would change with the gate. Ask "
                    "the compact successor (TheseusModel.to_compact_model()) or the predecessor for them."
                )

    def compact_config(self) -> PretrainedConfig:
        """The predecessor's config describing the all-successor model (see :meth:`_compact_shape`)."""
        config = copy.deepcopy(self.model.config)
        for name, value in self._compact_shape().items():
            setattr(config, name, value)
        if self.decoder:
            for name, value in compact_decoder_config(config, self.num_modules).items():
                setattr(config, name, value)
        return config

    def _compact_shape(self) -> dict[str, int]:
        """The config values the all-successor model changes: ``n`` layers, and each value every successor changes
        alike: a plain layer's feed-forward width when it is narrower than the predecessor's, or whatever a
        :class:`~theseus_pl.core.successors.Reshaping` successor says (a narrower width's ``narrow_hidden_size``:
        ``hidden_size`` stays the embeddings' and the task head's)."""
        config = self.model.config
        changes = [
            block.successor.compact_config_changes(config)
            if isinstance(block.successor, Reshaping)
            else _feed_forward_width(block.successor, config)
            for block in self.blocks
        ]
        shape = {"num_hidden_layers": self.num_modules}
        for name in set().union(*changes):
            values = {change.get(name) for change in changes}
            if len(values) == 1 and None not in values:
                shape[name] = values.pop()
        return shape

    def to_compact_model(self) -> PreTrainedModel:
        """The successor alone: embeddings, the ``n`` successor modules and the head, as a model of the
        predecessor's class. When every successor is a layer that :meth:`compact_config` describes, it is a plain
        model of that config; otherwise (a custom factory's modules) the class keeps the successor modules
        themselves in its layer list."""
        if all(type(block.successor) is type(block.predecessor[0]) for block in self.blocks):
            compact = type(self.model)(self.compact_config()).to(next(self.model.parameters()).dtype)
            try:
                compact.load_state_dict(self._compact_state_dict(), strict=True)
                return compact.eval()
            except RuntimeError:  # layers of the family's class, shaped otherwise than any one config says
                pass
        return self._compact_with_own_modules()

    def _compact_with_own_modules(self) -> PreTrainedModel:
        """A copy of the model with the successor modules as its layer list (the predecessor layers not copied), in
        their all-successor state (narrow-width successors: only the first projects down, only the last up)."""
        self.set_gate(None)
        stack = find_layer_stack(self.model, self.layers_path)
        blocks = stack.layers
        setattr(stack.parent, stack.attribute, nn.ModuleList(block.successor for block in blocks))
        try:
            compact = copy.deepcopy(self.model)
        finally:
            setattr(stack.parent, stack.attribute, blocks)
        for name, value in self._compact_shape().items():
            setattr(compact.config, name, value)
        if self.decoder:
            for name, value in compact_decoder_config(compact.config, self.num_modules).items():
                setattr(compact.config, name, value)
            renumber_layers(compact.get_submodule(self.layers_path), start=0)
        for parameter in compact.parameters():
            parameter.grad = None  # a copy for inference: no training state travels with it
        return compact.requires_grad_(True).eval()

    def export(self, directory: str | Path, tokenizer: PreTrainedTokenizerBase | None = None) -> Path:
        """Save the compact successor (and its tokenizer): a plain checkpoint ``AutoModelFor…from_pretrained``
        loads, or for a custom factory's modules the pickled model (:func:`theseus_pl.core.io.load_successor`)."""
        return save_successor(self.to_compact_model(), directory, tokenizer)

    def _compact_state_dict(self) -> dict[str, torch.Tensor]:
        """Drop predecessor layers and rename ``<layers>.<i>.successor.*`` to ``<layers>.<i>.*``."""
        prefix = self.layers_path + "."
        state = {}
        for key, value in self.model.state_dict().items():
            if key.startswith(prefix):
                index, role, rest = key[len(prefix) :].split(".", 2)
                if role != "successor":
                    continue
                key = f"{prefix}{index}.{rest}"
            state[key] = value
        return state


def _feed_forward_width(module: nn.Module, config: PretrainedConfig) -> dict[str, int]:
    """A successor layer's feed-forward width under its config name, read from the family's layout; nothing for a
    family of unknown layout or a module without that Linear (another kind of module)."""
    family = family_of(config)
    if family is None or family.feed_forward is None:
        return {}
    try:
        linear = module.get_submodule(family.feed_forward.expand)
    except AttributeError:
        return {}
    return {family.feed_forward.width: linear.out_features} if isinstance(linear, nn.Linear) else {}


def check_successors_fit(theseus: TheseusModel, factory: str) -> None:
    """Run the model on four tokens, before any training, so that a successor module that fails, or returns hidden
    states of another shape than it was given, is named with the factory now.

    Shapes are compared with every other module replaced, then the others: each successor then starts and ends its
    own run of successors, where it must return its input's shape (a narrow-width successor projects down and up).
    A last pass runs all successors together.
    """
    shapes: dict[int, tuple[torch.Size, torch.Size]] = {}

    def record(index: int) -> Callable[..., None]:
        def hook(_: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            given = args[0] if args else kwargs["hidden_states"]
            returned = output[0] if isinstance(output, tuple) else output
            shapes[index] = (given.shape, getattr(returned, "shape", None))

        return hook

    blocks = theseus.blocks
    config = theseus.model.config
    input_ids = torch.arange(4, device=next(theseus.parameters()).device)[None] % config.vocab_size
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    alternate = [i % 2 == 0 for i in range(len(blocks))]
    training, error = theseus.training, None
    hooks = [block.successor.register_forward_hook(record(i), with_kwargs=True) for i, block in enumerate(blocks)]
    try:
        with torch.no_grad():
            for gate in (alternate, [not g for g in alternate], None):
                if gate is None:
                    for hook in hooks:
                        hook.remove()
                theseus.eval()(gate, **inputs, output_hidden_states=False, output_attentions=False)
    except Exception as caught:  # whatever the factory's modules raise inside the model
        error = caught
    finally:
        theseus.set_gate(None)
        theseus.train(training)
        for hook in hooks:
            hook.remove()
    for index, (given, returned) in sorted(shapes.items()):
        if returned != given:
            raise ValueError(
                f"Successor module {index} (built by {factory}) returned hidden states of shape "
                f"{None if returned is None else tuple(returned)} for an input of shape {tuple(given)}; a successor "
                "must return the shape it is given."
            ) from error
    if error is not None:
        raise ValueError(f"The successor modules built by {factory} do not run in the model: {error}") from error


def _reject_unsupported(model: PreTrainedModel, stack: LayerStack) -> None:
    """Refuse a model already wrapped, whose layer list now holds modules (a second wrap would count those as
    layers: a model of modules of modules); a list that is not one entry a layer, such as ALBERT's one group run at
    every depth (its compact model, built from a config of ``n`` layers, would run the group ``n`` times, not the
    model trained, and export something else); and encoders whose loop treats layer 0 specially, which wrapping the
    list would silently change."""
    if any(isinstance(layer, TheseusBlock) for layer in stack.layers):
        raise ValueError(
            f"This {type(model).__name__} is already wrapped by a TheseusModel, which takes ownership of its "
            "predecessor and turns its layer list into modules: load the predecessor again for each TheseusModel, "
            "or pass each one copy.deepcopy(predecessor)."
        )
    depth = getattr(model.config, "num_hidden_layers", None)
    if isinstance(depth, int) and depth != len(stack.layers):
        raise ValueError(
            f"The list {stack.path} of this {type(model).__name__} has length {len(stack.layers)}, but its config "
            f"says {depth} layers (num_hidden_layers): module replacing needs the list of its layers, one entry "
            "each; a model that runs shared layers at several depths (ALBERT) has no such list."
        )
    # DeBERTa-v2's encoder holds its convolution beside the layer list; ConvBERT's conv_kernel_size sizes the ones
    # inside each of its layers, which the successors' copies carry along
    if getattr(stack.parent, "conv", None) is not None:
        raise ValueError(
            f"{type(model).__name__} applies a convolution after its first layer (conv_kernel_size="
            f"{model.config.conv_kernel_size}); module replacing would move it after the first module. "
            "Models with conv_kernel_size=0 (e.g. DeBERTa-v3) are supported."
        )
