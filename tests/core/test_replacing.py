import copy

import pytest
import torch
from conftest import VOCAB, tiny_inputs, tiny_model
from safetensors import safe_open
from transformers import (
    AlbertConfig,
    AlbertForSequenceClassification,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertTokenizer,
    ConvBertConfig,
    ConvBertForSequenceClassification,
)

from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.replacing import (
    TheseusModel,
    module_layer_ranges,
    module_sizes,
    modules_around,
    successor_source_layers,
)

pytestmark = pytest.mark.quick


@pytest.mark.parametrize(
    ("layers", "modules", "sizes"),
    [(12, 6, [2] * 6), (12, 5, [3, 3, 2, 2, 2]), (6, 3, [2, 2, 2]), (4, 4, [1] * 4), (7, 1, [7]), (6, 4, [2, 2, 1, 1])],
)
def test_layers_split_into_consecutive_modules(layers, modules, sizes):
    assert module_sizes(layers, modules) == sizes
    ranges = module_layer_ranges(layers, modules)
    assert [len(r) for r in ranges] == sizes
    assert [i for r in ranges for i in r] == list(range(layers))


@pytest.mark.parametrize("modules", [0, -1, 13])
def test_successor_depth_outside_one_to_l_is_refused(modules):
    with pytest.raises(ValueError, match=rf"successor_layers={modules} must be between 1 and the predecessor's 12"):
        module_sizes(12, modules)


def test_successor_depth_is_checked_when_wrapping_a_model():
    with pytest.raises(ValueError, match="successor_layers=5 must be between 1 and the predecessor's 4 layers"):
        TheseusModel(tiny_model(), 5)


@pytest.mark.parametrize(
    ("init", "sources"),
    [("bottom", [0, 1, 2, 3, 4, 5]), ("top", [6, 7, 8, 9, 10, 11]), ("every_other", [0, 2, 4, 6, 8, 10])],
)
def test_successor_layers_start_as_the_chosen_predecessor_layers(init, sources):
    assert successor_source_layers(12, 6, init) == sources


@pytest.mark.parametrize(
    ("kept", "ranges"),
    [
        ([0, 2, 3], [range(0, 2), range(2, 3), range(3, 6)]),
        ([1, 4, 5], [range(0, 4), range(4, 5), range(5, 6)]),  # layer 0, before the first kept, joins module 0
        ([0, 1, 2, 3, 4, 5], [range(i, i + 1) for i in range(6)]),
    ],
)
def test_modules_form_around_kept_layers_and_cover_every_layer_once(kept, ranges):
    assert modules_around(kept, 6) == ranges
    assert [i for r in ranges for i in r] == list(range(6))


@pytest.mark.parametrize("kept", [[], [2, 1], [1, 1], [0, 6], [-1, 2]])
def test_kept_layers_that_are_not_ascending_indices_are_refused(kept):
    with pytest.raises(ValueError, match="must be ascending indices of the predecessor's 6 layers"):
        modules_around(kept, 6)


def test_successors_listed_by_layer_start_as_those_layers_and_give_that_removal_at_p1():
    model = tiny_model()  # 4 layers
    kept = [1, 3]
    reference = copy.deepcopy(model)
    theseus = TheseusModel(model, 2, init=kept)
    assert theseus.module_ranges == [range(0, 3), range(3, 4)] and theseus.successor_sources == kept
    stack = find_layer_stack(reference)
    setattr(stack.parent, stack.attribute, torch.nn.ModuleList(stack.layers[i] for i in kept))
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = reference.eval()(**inputs).logits
        assert torch.allclose(theseus.eval()([True, True], **inputs).logits, expected, atol=1e-6)


def test_a_layer_list_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="init names 3 layers for successor_layers=2"):
        TheseusModel(tiny_model(), 2, init=[0, 1, 2])


def test_unknown_successor_init_is_refused():
    with pytest.raises(ValueError, match="'middle' is not a valid SuccessorInit"):
        successor_source_layers(12, 6, "middle")


@pytest.mark.parametrize("init", ["bottom", "top", "every_other"])
def test_successor_weights_are_copies_not_shared(init):
    model = tiny_model()
    originals = [copy.deepcopy(layer.state_dict()) for layer in model.bert.encoder.layer]
    theseus = TheseusModel(model, 2, init=init)
    for block, source in zip(theseus.blocks, theseus.successor_sources, strict=True):
        for key, value in block.successor.state_dict().items():
            assert torch.equal(value, originals[source][key])
        shared = {p.data_ptr() for p in block.successor.parameters()} & {
            p.data_ptr() for b in theseus.blocks for p in b.predecessor.parameters()
        }
        assert not shared


def test_only_successor_layers_are_trainable(family):
    theseus = TheseusModel(tiny_model(family), 2)
    successor = {id(p) for p in theseus.successor_parameters()}
    assert successor
    for name, parameter in theseus.named_parameters():
        assert parameter.requires_grad == (id(parameter) in successor), name


def test_all_predecessor_gate_reproduces_the_predecessor(family):
    model = tiny_model(family).eval()
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
        theseus = TheseusModel(model, 2).eval()
        assert torch.allclose(theseus([False, False], **inputs).logits, expected, atol=1e-6)


def test_a_mixed_gate_runs_successor_then_predecessor_layers(family):
    """Gate (successor, predecessor) with bottom init is layers 0, 2, 3 of the predecessor."""
    model = tiny_model(family).eval()
    reference = copy.deepcopy(model)
    stack = find_layer_stack(reference)
    setattr(stack.parent, stack.attribute, torch.nn.ModuleList([stack.layers[i] for i in (0, 2, 3)]))
    inputs = tiny_inputs()
    with torch.no_grad():
        theseus = TheseusModel(model, 2).eval()
        assert torch.allclose(theseus([True, False], **inputs).logits, reference(**inputs).logits, atol=1e-6)
        assert not torch.allclose(theseus([True, True], **inputs).logits, reference(**inputs).logits, atol=1e-4)


def test_no_gate_means_every_successor():
    theseus = TheseusModel(tiny_model(), 2).eval()
    inputs = tiny_inputs()
    with torch.no_grad():
        assert torch.equal(theseus(**inputs).logits, theseus(torch.tensor([True, True]), **inputs).logits)


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        ([True], "The gate has 1 entries but the model has 2 modules"),
        ([True, False, True], "The gate has 3 entries but the model has 2 modules"),
        (torch.ones(2, 2, dtype=torch.bool), r"1-D vector, got shape \(2, 2\)"),
    ],
)
def test_a_gate_of_the_wrong_shape_is_refused(gate, message):
    theseus = TheseusModel(tiny_model(), 2)
    with pytest.raises(ValueError, match=message):
        theseus(gate, **tiny_inputs())


@pytest.mark.parametrize("modules", [1, 2, 3])
def test_export_is_a_plain_checkpoint_with_only_the_successor(family, modules, tmp_path):
    model = tiny_model(family)
    predecessor_parameters = sum(p.numel() for p in model.parameters())
    layer_parameters = sum(p.numel() for p in find_layer_stack(model).layers[0].parameters())
    theseus = TheseusModel(model, modules).eval()
    theseus.export(tmp_path)

    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(model)
    assert reloaded.config.num_hidden_layers == modules
    assert sum(p.numel() for p in reloaded.parameters()) == predecessor_parameters - (4 - modules) * layer_parameters
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    assert not [key for key in keys if "predecessor" in key or "successor" in key]
    assert {
        int(key.split(theseus.layers_path + ".")[1].split(".")[0]) for key in keys if theseus.layers_path in key
    } == set(range(modules))

    inputs = tiny_inputs()
    with torch.no_grad():
        assert torch.allclose(reloaded(**inputs).logits, theseus(**inputs).logits, atol=1e-5)


def test_export_puts_the_tokenizer_beside_the_model(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"w{i}" for i in range(VOCAB - 5)]]))
    tokenizer = BertTokenizer.from_pretrained(tmp_path)
    out = TheseusModel(tiny_model(), 2).export(tmp_path / "successor", tokenizer)
    reloaded = AutoTokenizer.from_pretrained(out)
    assert reloaded("w1 w2")["input_ids"] == tokenizer("w1 w2")["input_ids"] == [2, 6, 7, 3]  # its words, not [UNK]


def test_a_predecessor_already_wrapped_is_refused_rather_than_split_as_modules_of_modules():
    predecessor = tiny_model()  # 4 layers, which the first wrap turns into 2 modules in place
    TheseusModel(predecessor, 2)
    for successor_layers in (1, 2, 4):
        with pytest.raises(ValueError, match=r"already wrapped by a TheseusModel.*copy\.deepcopy\(predecessor\)"):
            TheseusModel(predecessor, successor_layers)


def test_a_layer_list_shorter_than_the_configs_depth_is_refused_as_albert_shares_its_layers():
    """ALBERT runs one layer group at each of its 4 depths: wrapped, the model trained was that group's successor run
    4 times, while its compact model (a config of 1 layer) ran it once, so the export scored differently."""
    config = AlbertConfig(vocab_size=VOCAB, hidden_size=32, embedding_size=16, num_hidden_layers=4,
                          num_attention_heads=2, intermediate_size=48, num_labels=2)  # fmt: skip
    model = AlbertForSequenceClassification(config)
    refused = r"^The list albert\.encoder\.albert_layer_groups of this \w+ has length 1, but its config says 4 layers"
    with pytest.raises(ValueError, match=refused):
        TheseusModel(model, 1, layers_path="albert.encoder.albert_layer_groups")


def test_deberta_with_a_first_layer_convolution_is_refused():
    with pytest.raises(ValueError, match=r"conv_kernel_size=3.*DeBERTa-v3"):
        TheseusModel(tiny_model("deberta-v2", conv_kernel_size=3), 2)


def test_convbert_whose_convolutions_are_inside_its_layers_is_wrapped_not_refused_as_deberta():
    """Its conv_kernel_size (9 by default) sizes each layer's own convolution: it was refused as DeBERTa-v2's."""
    torch.manual_seed(0)
    config = ConvBertConfig(vocab_size=VOCAB, hidden_size=32, embedding_size=32, num_hidden_layers=4,
                            num_attention_heads=2, intermediate_size=37, conv_kernel_size=3, num_labels=3)  # fmt: skip
    predecessor = ConvBertForSequenceClassification(config).eval()
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = predecessor(**inputs).logits
        theseus = TheseusModel(predecessor, 2, layers_path="convbert.encoder.layer").eval()
        torch.testing.assert_close(theseus([False, False], **inputs).logits, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("gate", [[False, False], [True, False], [True, True]])
@pytest.mark.parametrize("output", ["output_hidden_states", "output_attentions"])
def test_per_layer_outputs_are_refused_for_every_gate_rather_than_counted_per_inner_layer(family, gate, output):
    theseus = TheseusModel(tiny_model(family), 2).eval()
    with pytest.raises(ValueError, match=rf"{output}=True is not supported on a TheseusModel.*to_compact_model"):
        theseus(gate, **tiny_inputs(), **{output: True})


def test_hidden_states_asked_for_through_the_config_are_refused_too(family):
    theseus = TheseusModel(tiny_model(family), 2).eval()
    theseus.model.config.output_hidden_states = True
    with pytest.raises(ValueError, match=r"output_hidden_states=True is not supported"):
        theseus(None, **tiny_inputs())


def test_the_compact_successor_gives_one_hidden_state_per_module(family):
    theseus = TheseusModel(tiny_model(family), 2).eval()
    with torch.no_grad():
        hidden = theseus.to_compact_model()(**tiny_inputs(), output_hidden_states=True).hidden_states
    assert len(hidden) == 2 + 1  # embeddings, then each module
