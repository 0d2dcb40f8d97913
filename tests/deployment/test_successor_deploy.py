"""A pickled successor deploys to ONNX like a plain one."""

import pytest
from conftest import tiny_model

from theseus_pl.app.kinds.task_model.shipping import deploy_model
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors import (
    feed_forward_block,
)
from theseus_pl.deployment.record import DeploySettings

pytestmark = pytest.mark.quick

WIDTH = 20  # of the tiny models' 37 feed-forward neurons


def test_a_pickled_successor_deploys_to_onnx_like_a_plain_one(tmp_path, tiny_tokenizer, glue_dir):
    theseus = TheseusModel(tiny_model("bert", num_labels=2), 2, factory=feed_forward_block)
    folder = theseus.export(tmp_path / "successor", tiny_tokenizer)
    settings = DeploySettings(batch_sizes=(1,), repeats=1, sequence_length=12, quantize=None)
    block = deploy_model(folder, settings, task="RTE", glue_dir=str(glue_dir))
    assert (folder / block.onnx).is_file() and block.max_abs_diff <= block.tolerance
