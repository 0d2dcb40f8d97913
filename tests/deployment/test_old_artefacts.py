"""What users saved before the modules were arranged in floors (theseus_pl 0.1, commit d89bb0e) loads and deploys.

A pickle names each class by its module, and theseus_pl 0.1 had other module names (``theseus_pl.narrow_width``,
``theseus_pl.successors``). No weights are kept in the repository: each test pickles a successor under those
names (:func:`pickled_under_old_names`), as that version wrote it. ``fixtures/run_before_floors/.hydra`` is the
config a ``python -m theseus_pl`` run of that version wrote (tiny RTE, ``theseus.successor.hidden_size=16``): its
data module is named by 0.1's class path.
"""

import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path

import pytest
import torch
from app_runs import compose_config, tiny_run_overrides
from conftest import tiny_model

from theseus_pl.app.kinds.task_model.shipping import deploy_model, deploy_run
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.families import find_layer_stack
from theseus_pl.core.io import MOVED_MODULES, PICKLED, load_successor
from theseus_pl.core.replacing import TheseusModel
from theseus_pl.core.successors import FeedForwardBlock, NarrowWidthSuccessor, feed_forward_block
from theseus_pl.deployment.record import DeploySettings

pytestmark = pytest.mark.quick

FIXTURES = Path(__file__).parent / "fixtures"
QUICK = {"batch_sizes": (1,), "repeats": 1, "sequence_length": 12}


@contextmanager
def pickled_under_old_names() -> Iterator[None]:
    """While it lasts, the classes of the moved modules pickle under their 0.1 module names (the modules answer to
    those names too, as pickle checks): a successor saved now is saved as 0.1 saved it."""
    renamed = []
    for old, new in MOVED_MODULES.items():
        module = import_module(new)
        sys.modules[old] = module
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == new:
                value.__module__ = old
                renamed.append((value, new))
    try:
        yield
    finally:
        for cls, new in renamed:
            cls.__module__ = new
        for old in MOVED_MODULES:
            del sys.modules[old]


def test_a_successor_pickled_before_the_move_loads_and_deploys(tmp_path, tiny_tokenizer, glue_dir):
    theseus = TheseusModel(tiny_model("bert", num_labels=2), 2, factory=feed_forward_block)
    with pickled_under_old_names():
        folder = theseus.export(tmp_path / "successor", tiny_tokenizer)
    assert b"theseus_pl.successors" in (folder / PICKLED).read_bytes()  # the old module name
    assert all(type(layer) is FeedForwardBlock for layer in find_layer_stack(load_successor(folder)).layers)
    block = deploy_model(folder, DeploySettings(quantize=None, **QUICK), task="RTE", glue_dir=str(glue_dir))
    assert (folder / block.onnx).is_file() and block.max_abs_diff <= block.tolerance


@pytest.mark.slow
def test_a_run_folder_written_before_the_move_deploys_and_keeps_its_scores(tmp_path, tiny_base, glue_dir):
    overrides = tiny_run_overrides(tiny_base, glue_dir, tmp_path)
    run(compose_config(*overrides, "theseus.successor.hidden_size=16", "benchmark.repeats=0"))
    run_dir = tmp_path / "run"
    # The folder as theseus_pl 0.1 left it: that version's config, its pickle names, results.json without a version.
    shutil.copytree(FIXTURES / "run_before_floors" / ".hydra", run_dir / ".hydra", dirs_exist_ok=True)
    with pickled_under_old_names():
        torch.save(load_successor(run_dir / "successor"), run_dir / "successor" / PICKLED)
    before = json.loads((run_dir / "results.json").read_text())
    before.pop("schema_version")
    (run_dir / "results.json").write_text(json.dumps(before))
    assert b"theseus_pl.narrow_width" in (run_dir / "successor" / PICKLED).read_bytes()
    assert "theseus_pl.data.datamodule.GlueDataModule" in (run_dir / ".hydra" / "config.yaml").read_text()
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
