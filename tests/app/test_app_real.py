"""The README's quick real run, whole: `+experiment=sst2_quick` compresses the packaged MiniLM on real SST-2."""

import pytest
from app_runs import compose_config

from theseus_pl.app.results.reading import read_results
from theseus_pl.app.results.task_model import LayerCounts
from theseus_pl.app.run.pipeline import run

pytestmark = pytest.mark.slow


def test_sst2_quick_gives_a_successor_that_learned_the_task(real_glue_dir, tmp_path):
    """About 4 minutes on 2 CPU cores. SST-2's dev set is 51% positive: both scores must be far above that."""
    results = run(compose_config(
        "+experiment=sst2_quick", f"data.glue_dir={real_glue_dir}", "logger=csv",
        f"paths.cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'run'}",
    ))  # fmt: skip
    assert read_results(tmp_path / "run" / "results.json").successor == results.successor
    assert (results.data.train_size, results.data.eval_size) == (4000, 872)
    assert results.layers == LayerCounts(predecessor=6, successor=3)
    assert results.predecessor.score > 80
    assert results.successor.score > 75 and results.retained > 0.9
    assert results.speedup > 1.3
