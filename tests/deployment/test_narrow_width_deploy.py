"""Successors narrower than the hidden width, deployed to ONNX and int8."""

import pytest
from conftest import tiny_model
from narrow_models import narrow_theseus

from theseus_pl.app.kinds.task_model.shipping import deploy_model
from theseus_pl.core.io import PICKLED
from theseus_pl.deployment.record import DeploySettings

pytestmark = pytest.mark.quick


def test_a_narrow_width_successor_deploys_to_onnx_and_int8_beside_its_predecessor(tmp_path, tiny_tokenizer, glue_dir):
    model = tiny_model("bert", num_labels=2)
    model.save_pretrained(tmp_path / "predecessor")
    folder = narrow_theseus(model, 2).export(tmp_path / "successor", tiny_tokenizer)
    settings = DeploySettings(batch_sizes=(1,), repeats=1, sequence_length=12, quantize="int8")
    block = deploy_model(folder, settings, task="RTE", glue_dir=str(glue_dir), predecessor_dir=tmp_path / "predecessor")
    assert (folder / block.onnx).is_file() and block.max_abs_diff <= block.tolerance
    assert (folder / block.onnx_int8).is_file()
    sizes = block.size_mb
    assert sizes["pytorch_successor"] == pytest.approx((folder / PICKLED).stat().st_size / 1e6)
    assert block.smaller_than_predecessor["pytorch_successor"] > 1
