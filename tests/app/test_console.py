"""What ``python -m theseus_pl`` prints: each line once, the tool's own lines plain, third-party chatter gone."""

import io
import logging
import re

import pytest
import transformers
from app_runs import compose_config, tiny_run_overrides
from conftest import tiny_model

from theseus_pl.app.predecessors.classifier import load_classifier
from theseus_pl.app.run.pipeline import run
from theseus_pl.app.tracking.console import ConsoleFormatter, configure_console
from theseus_pl.data.tasks import glue_task

pytestmark = pytest.mark.quick


def test_lightning_lines_are_printed_once_by_the_apps_handler_and_its_info_only_when_verbose():
    import lightning  # noqa: F401  (its console handler is what printed every line twice)

    root, printed = logging.getLogger(), io.StringIO()
    handler = logging.StreamHandler(printed)
    root.addHandler(handler)
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    try:
        configure_console(verbose=False)
        assert not logging.getLogger("lightning").handlers
        rank_zero.info("GPU available: False, used: False")
        rank_zero.warning("The number of training batches (6) is smaller than the logging interval")
        configure_console(verbose=True)
        rank_zero.info("GPU available: False, used: False")
    finally:
        root.removeHandler(handler)
        configure_console(verbose=False)
    assert printed.getvalue().splitlines() == [
        "The number of training batches (6) is smaller than the logging interval",
        "GPU available: False, used: False",
    ]


def test_the_console_shows_the_level_only_where_it_matters():
    formatter = ConsoleFormatter()
    info = logging.LogRecord("theseus_pl", logging.INFO, "x.py", 1, "Step 150: successor fine-tuning starts.", (), None)
    warning = logging.LogRecord("theseus_pl", logging.WARNING, "x.py", 1, "Step 'speedup' failed", (), None)
    assert formatter.format(info)[8:] == " Step 150: successor fine-tuning starts."
    assert formatter.format(warning)[8:] == " WARNING: Step 'speedup' failed"


def test_loading_a_base_with_a_new_head_prints_no_load_report(tmp_path):
    tiny_model("bert").save_pretrained(tmp_path)  # 3 labels; RTE has 2: the head is replaced
    printed = io.StringIO()
    handler = logging.StreamHandler(printed)
    transformers.logging.add_handler(handler)  # transformers' loggers do not propagate to the root logger
    before = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_warning()  # the library default; another test may have lowered it
    try:
        model = load_classifier(str(tmp_path), glue_task("RTE"), new_head=True)
        assert model.config.num_labels == 2
        assert "LOAD REPORT" not in printed.getvalue()
        assert transformers.logging.get_verbosity() == transformers.logging.WARNING
        transformers.AutoModelForSequenceClassification.from_pretrained(
            tmp_path, num_labels=2, ignore_mismatched_sizes=True
        )
        assert "LOAD REPORT" in printed.getvalue()  # elsewhere the report still shows
    finally:
        transformers.logging.remove_handler(handler)
        transformers.logging.set_verbosity(before)


def test_a_run_asked_for_no_progress_bar_trains_without_one(tiny_base, glue_dir, tmp_path, capsys):
    """``+trainer.enable_progress_bar=false``: Lightning refused the run's own bar (callbacks.progress_bar) with a
    traceback once the predecessor was made; now no bar is shown, the dev passes' and the fine-tuning's neither."""
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), "+trainer.enable_progress_bar=false"]
    results = run(compose_config(*overrides, "benchmark.repeats=0"))
    assert results.successor.score is not None
    shown = capsys.readouterr()
    assert not re.search(r"Epoch \d+:|Validation DataLoader", shown.out + shown.err)
