"""Every method trains under bf16 autocast on the CPU, and every run records its precision and the CPU's flags."""

import pytest
from app_runs import compose_config, tiny_run_overrides

from theseus_pl.app.kinds.task_model.record import TaskModelResults
from theseus_pl.app.results.reading import read_run
from theseus_pl.app.run.pipeline import run
from theseus_pl.core.precision import RELEVANT_FLAGS, this_cpu
from theseus_pl.lightning.precision import run_precision

pytestmark = pytest.mark.quick

METHODS = ["theseus", "theseus_kd", "fine_tuning", "kd", "pkd", "layerdrop"]


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_under_bf16_autocast_on_the_cpu(method, tiny_base, glue_dir, tmp_path):
    overrides = [*tiny_run_overrides(tiny_base, glue_dir, tmp_path), f"method={method}", "trainer.precision=bf16-mixed"]
    results = run(compose_config(*overrides))
    assert results.steps == 6 and results.successor.score is not None
    assert results.hardware.precision == results.hardware.precision_requested == "bf16-mixed"
    assert results.hardware.precision_reason == "set by trainer.precision"
    assert read_run(tmp_path / "run" / "results.json", TaskModelResults).hardware == results.hardware


def test_auto_resolves_by_this_cpu_and_is_recorded(tiny_base, glue_dir, tmp_path):
    results = run(compose_config(*tiny_run_overrides(tiny_base, glue_dir, tmp_path)))
    cpu = this_cpu()
    assert results.hardware.precision_requested == "auto"
    # the measurement the run kept, where it needed one: the machine's, or on a busy machine its folder's
    choice = run_precision("auto", "cpu", tmp_path / "cache", [tmp_path / "run"])
    assert (results.hardware.precision, results.hardware.precision_reason) == (choice.precision, choice.reason)
    assert results.hardware.cpu == cpu.model and set(results.hardware.cpu_flags) <= set(RELEVANT_FLAGS)
    assert results.hardware.accelerator == "cpu"


def test_a_precision_lightning_trains_otherwise_on_this_machine_is_recorded_as_trained(tmp_path):
    """16-mixed on a CPU trained in bf16-mixed (Lightning has no fp16 autocast there) and was recorded as 16-mixed."""
    choice = run_precision("16-mixed", "cpu", tmp_path / "cache")
    assert choice.precision == "bf16-mixed"
    assert (
        choice.reason == "set by trainer.precision as 16-mixed, which Lightning trains in as bf16-mixed on this machine"
    )
    assert run_precision("32-true", "cpu", tmp_path / "cache").reason == "set by trainer.precision"
    assert (
        run_precision("no-such-precision", "cpu", tmp_path / "cache").precision == "no-such-precision"
    )  # checks refuse it
