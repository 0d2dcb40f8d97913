"""``trainer.precision=auto``'s bf16 measurement is taken once per machine and kept in the cache: the jobs of a sweep,
started together, train in one precision, also where the machine was busy as it was measured."""

import multiprocessing
import random
import time
from pathlib import Path

import pytest

from theseus_pl.core.precision import Bf16Measurement
from theseus_pl.core.timing import BUSY_CORES
from theseus_pl.lightning import precision
from theseus_pl.lightning.precision import machine_bf16_measurement

pytestmark = pytest.mark.quick


def job(cache_dir: Path, answer: Path) -> None:
    """A sweep's job asking for the machine's measurement, which here is slow and random: two jobs at once agree
    only if one measured and the other read it. Forked from this process, which has imported Lightning already (a
    fresh interpreter spends 4 s importing it); the lock the two contend for is the operating system's either way."""

    def slow_random_measurement() -> Bf16Measurement:
        time.sleep(1.0)
        (answer.parent / f"{answer.name}.measured").touch()
        return Bf16Measurement(random.SystemRandom().random(), 0.0)  # not the random state both forks copied

    precision.measure_bf16 = slow_random_measurement
    answer.write_text(repr(precision.machine_bf16_measurement(cache_dir).ratio))


def test_two_jobs_started_together_measure_once_and_read_the_same_ratio(tmp_path):
    answers = [tmp_path / f"job{number}" for number in (0, 1)]
    jobs = [multiprocessing.get_context("fork").Process(target=job, args=(tmp_path, answer)) for answer in answers]
    for started in jobs:
        started.start()
    for started in jobs:
        started.join(120)
    assert [started.exitcode for started in jobs] == [0, 0]
    assert answers[0].read_text() == answers[1].read_text()
    assert len(list(tmp_path.glob("job*.measured"))) == 1
    assert len(list((tmp_path / "machine").glob("bf16-*"))) == 1


def test_a_later_run_reads_the_kept_measurement_and_says_when_it_was_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.5, 0.0))
    first = machine_bf16_measurement(tmp_path)
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.9, 0.0))
    again = machine_bf16_measurement(tmp_path)
    assert first == again and again.ratio == 0.5
    assert "when first measured on this machine" in again.when and str(tmp_path) in again.when


def test_a_busy_measurement_serves_its_run_and_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.9, BUSY_CORES + 1))
    busy = machine_bf16_measurement(tmp_path)
    assert busy.ratio == 0.9 and busy.busy and "not kept" in busy.when
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.5, 0.0))
    assert machine_bf16_measurement(tmp_path).ratio == 0.5  # measured again


def test_a_busy_measurement_is_kept_for_its_sweeps_other_jobs_alone(tmp_path, monkeypatch):
    """On a machine kept busy (another program, a test suite's other worker) each job measured anew: two jobs of one
    sweep trained in different precisions where their ratios fell either side of the line."""
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.9, BUSY_CORES + 1))
    first = machine_bf16_measurement(tmp_path, [tmp_path / "sweep_a"])
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.6, BUSY_CORES + 1))
    assert machine_bf16_measurement(tmp_path, [tmp_path / "sweep_a"]) == first and first.ratio == 0.9
    assert (
        first.busy
        and f"when the first run measured it in {tmp_path / 'sweep_a'} (busy: kept for its runs)" in first.when
    )
    assert machine_bf16_measurement(tmp_path, [tmp_path / "sweep_b"]).ratio == 0.6  # another sweep measures again
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.5, 0.0))
    machines = machine_bf16_measurement(tmp_path)  # nothing was kept for the machine
    assert machines.ratio == 0.5 and "when first measured on this machine" in machines.when
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.7, 0.0))
    swept = machine_bf16_measurement(tmp_path, [tmp_path / "sweep_c"])  # a later sweep reads the machine's
    assert swept.ratio == 0.5 and swept.when.startswith(machines.when.split(", kept in")[0])


def test_a_busy_measurement_is_kept_for_the_runs_folder_and_read_by_each_job_of_its_sweep_alike(tmp_path, monkeypatch):
    """A DDP rank re-runs the command in the run's folder and a resume goes on there: each reads what the first
    process measured, so the ranks and the resumed run train in the precision it started in; a sweep's jobs, each in
    its own folder, read their sweep's, and say so in the same words."""
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.79, BUSY_CORES + 1))
    run = machine_bf16_measurement(tmp_path, [tmp_path / "run"])
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.85, BUSY_CORES + 1))
    assert machine_bf16_measurement(tmp_path, [tmp_path / "run"]) == run and run.ratio == 0.79  # rank 1, a resume
    sweep = tmp_path / "sweep"
    jobs = [machine_bf16_measurement(tmp_path, [sweep / str(job), sweep]) for job in (0, 1)]
    assert jobs[0] == jobs[1] and jobs[0].ratio == 0.85 and str(sweep) in jobs[0].when
    monkeypatch.setattr(precision, "measure_bf16", lambda: Bf16Measurement(0.5, 0.0))
    calm = machine_bf16_measurement(tmp_path, [tmp_path / "later"])  # not busy: the machine's, nothing for the folder
    assert calm.ratio == 0.5 and "when first measured on this machine" in calm.when
    assert len(list((tmp_path / "machine").glob("bf16-*-for-*"))) == 4  # run, sweep, its two jobs: not "later"
