"""What users saved before the modules were arranged in floors (theseus_pl 0.1, commit d89bb0e) loads and deploys.

The fixtures were written by that version's own code on a tiny random BERT: ``run_before_floors`` is a finished
``python -m theseus_pl`` run folder (tiny RTE, ``theseus.successor.hidden_size=16``, so its successor is pickled
and names ``theseus_pl.narrow_width`` classes), ``successor_before_floors`` a successor of ``feed_forward_block``
modules saved by ``TheseusModel.export`` (a pickle naming ``theseus_pl.successors.FeedForwardBlock``).
"""

import json
import shutil
from pathlib import Path

import pytest

from theseus_pl.app.deploy_folder import deploy_model, deploy_run
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.io import load_successor
from theseus_pl.core.successors import FeedForwardBlock, NarrowWidthSuccessor
from theseus_pl.deployment.stage import DeploySettings

FIXTURES = Path(__file__).parent / "fixtures"
QUICK = {"batch_sizes": (1,), "repeats": 1, "sequence_length": 12}


def test_a_successor_pickled_before_the_move_loads_and_deploys(tmp_path, glue_dir):
    folder = shutil.copytree(FIXTURES / "successor_before_floors", tmp_path / "successor")
    assert b"theseus_pl.successors" in (folder / "successor.pt").read_bytes()  # the old module name
    assert all(type(layer) is FeedForwardBlock for layer in find_layer_stack(load_successor(folder)).layers)
    block = deploy_model(folder, DeploySettings(quantize=None, **QUICK), task="RTE", glue_dir=str(glue_dir))
    assert (folder / block.onnx).is_file() and block.max_abs_diff <= block.tolerance


@pytest.mark.slow
def test_a_run_folder_written_before_the_move_deploys_and_keeps_its_scores(tmp_path, glue_dir):
    run_dir = shutil.copytree(FIXTURES / "run_before_floors", tmp_path / "run")
    before = json.loads((run_dir / "results.json").read_text())
    successor = load_successor(run_dir / "successor")
    assert all(isinstance(layer, NarrowWidthSuccessor) for layer in find_layer_stack(successor).layers)
    # Its config names the data module and glue folder of its day; the GLUE rows are rebuilt here alike.
    block = deploy_run(run_dir, DeploySettings(quantize="int8", **QUICK), glue_dir=str(glue_dir))
    after = json.loads((run_dir / "results.json").read_text())
    assert after["deployment"]["onnx_int8"] == block.onnx_int8 == "onnx/model_int8.onnx"
    assert block.max_abs_diff <= block.tolerance
    assert block.dev_score["pytorch_successor"] == pytest.approx(before["successor"]["score"])
    assert after["successor"] == before["successor"] and after["predecessor"] == before["predecessor"]
    assert "ONNX" in (run_dir / "successor" / "README.md").read_text()
