"""LLM-Streamline's baseline: one stand-in layer trained on a block's hidden states."""

import pytest
import torch
from decoder_models import InMemoryText, tiny_decoder, tiny_documents, tiny_lm_tokenizer, tiny_token_ids
from test_modules import make_trainer

from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.layer_removal import block_input_output
from theseus_pl.data.language_model import LanguageModelingDataModule
from theseus_pl.lightning.block_replacement import BlockReplacementModule, streamlined_model
from theseus_pl.lightning.language_model_metrics import LanguageModelMetrics

pytestmark = pytest.mark.quick


def test_the_block_is_read_without_running_the_layers_above_it():
    model = tiny_decoder("llama")
    layers = find_layer_stack(model).layers
    calls = []
    layers[3].register_forward_pre_hook(lambda *_: calls.append(3))
    ids = tiny_token_ids()
    entering, _, kwargs, leaving = block_input_output(model, {"input_ids": ids}, start=1, length=2)
    assert calls == []
    assert entering.shape == leaving.shape == (2, 12, 32)
    assert "position_embeddings" in kwargs
    with torch.no_grad():  # the block's own layers, run again from what entered it, give what left it
        hidden = entering
        for layer in layers[1:3]:
            hidden = layer(hidden, **kwargs)
    torch.testing.assert_close(hidden, leaving)


def test_the_streamlined_model_has_one_layer_for_the_block():
    compact = streamlined_model(tiny_decoder("llama"), start=1, length=3)
    assert compact.config.num_hidden_layers == 2
    with pytest.raises(ValueError, match="block of 4 layers from layer 1"):
        streamlined_model(tiny_decoder("llama"), start=1, length=4)


def test_the_stand_in_layer_learns_the_blocks_mapping_and_nothing_else_moves(tmp_path):
    predecessor = tiny_decoder("llama")
    module = BlockReplacementModule(predecessor, start=1, length=2, metrics=LanguageModelMetrics(), lr=3e-3)
    before = {name: p.detach().clone() for name, p in module.named_parameters()}
    datamodule = LanguageModelingDataModule(
        tiny_lm_tokenizer(), InMemoryText(tiny_documents(count=20)), window=8, batch_size=4, cache_dir=tmp_path
    )
    datamodule.setup("fit")
    batch = next(iter(datamodule.train_dataloader()))
    first = float(module.block_loss(batch))
    make_trainer(tmp_path, 30).fit(module, datamodule=datamodule)
    assert float(module.block_loss(batch)) < first / 2
    moved = {name for name, p in module.named_parameters() if not torch.equal(p, before[name])}
    assert moved and all(name.startswith("model.model.layers.1.") for name in moved)


def test_a_streamline_checkpoint_holds_the_compact_model_once_and_not_the_predecessor():
    predecessor = tiny_decoder("llama")
    module = BlockReplacementModule(predecessor, start=1, length=2)
    keys = module.state_dict().keys()
    assert all(key.startswith("model.") for key in keys)
    assert len(keys) == len(streamlined_model(predecessor, 1, 2).state_dict())
