"""The precision a run's Trainer gets: :mod:`theseus_pl.core.precision`'s rule, with its bf16 measurement taken once
per machine and kept in the cache.

Measured in each process, ``trainer.precision=auto`` let the jobs of one sweep disagree: started together, each timed
bf16 against fp32 while the others were starting up, and one chose fp32 (0.82x, over the 0.8x line) beside another's
bf16 (0.44x). They then fine-tuned two predecessors (the precision is part of a predecessor's cache key) and trained in
two precisions, which a sweep's comparison must not mix. The first job now measures under the cache's file lock while
the others wait, idle, and every later run on the machine reads what it found. The entry is keyed by what decides the
ratio: the CPU's model and flags, the torch version and the torch threads. A measurement that stayed busy (another
program kept the cores) is not kept for the machine: it serves its own run and, in a sweep, the sweep's other jobs
(kept for that sweep alone, so its jobs still train in one precision); the next run or sweep measures again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import warnings
from datetime import datetime, timezone
from pathlib import Path

import lightning.pytorch as pl
import torch

from theseus_pl.core.precision import Bf16Measurement, PrecisionChoice, measure_bf16, resolve_precision, this_cpu
from theseus_pl.data.cache_entry import load_or_build
from theseus_pl.lightning.quiet import quiet_trainer_construction

log = logging.getLogger(__name__)

MEASUREMENT = "measurement.json"


class _BusyMeasurement(Exception):
    """Raised inside the cache entry's build so that a busy measurement is not kept."""

    def __init__(self, measurement: Bf16Measurement) -> None:
        super().__init__("the machine stayed busy while measuring")
        self.measurement = measurement


def run_precision(requested: str, accelerator: str, cache_dir: Path, sweep: Path | None = None) -> PrecisionChoice:
    """What ``trainer.precision`` means for a run on this machine, its bf16 measurement (where the rule needs one)
    kept under ``cache_dir``; as Lightning trains in it (``16-mixed`` on a CPU is bf16-mixed: no fp16 autocast
    there), so that the record says what the run trained in. ``sweep``: the folder of the sweep the run is a job
    of, whose jobs share one measurement."""
    choice = resolve_precision(requested, accelerator, lambda: machine_bf16_measurement(cache_dir, sweep))
    trained = lightning_precision(choice.precision, accelerator)
    if trained in (None, choice.precision):
        return choice
    return PrecisionChoice(trained, f"{choice.reason} as {choice.precision}, which Lightning trains in as {trained} "
                                    "on this machine")  # fmt: skip


def lightning_precision(precision: str, accelerator: str) -> str | None:
    """The precision Lightning's Trainer trains in when given ``precision`` on ``accelerator``, by its own rules (a
    Trainer built and dropped: nothing runs); None where Lightning refuses the pair (the run's checks say why)."""
    try:
        with quiet_trainer_construction(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its note that it swapped fp16 for bf16: the run's Trainer says it again
            silent = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
            trainer = pl.Trainer(accelerator=accelerator, devices=1, precision=precision, **silent)
    except (ValueError, TypeError, RuntimeError, ImportError):  # an unknown precision, an accelerator not here, ...
        return None
    return str(trainer.precision)


def machine_bf16_measurement(cache_dir: Path, sweep: Path | None = None) -> Bf16Measurement:
    """:func:`~theseus_pl.core.precision.measure_bf16` for this machine: read from ``cache_dir/machine/`` when a run
    measured it before, else measured (one job of a sweep; the others wait for it) and kept there. ``sweep``: the
    folder of the sweep the run is a job of; its jobs read one measurement, a busy one too."""
    cpu = this_cpu()
    identity = [cpu.model, cpu.relevant_flags, torch.__version__, torch.get_num_threads()]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    path = cache_dir / "machine" / f"bf16-{key}"

    def build(staging: Path) -> None:
        measurement = measure_bf16()
        if measurement.busy:
            raise _BusyMeasurement(measurement)
        _write(staging, measurement, "when first measured on this machine")

    def measured() -> Bf16Measurement | _BusyMeasurement:
        try:
            return load_or_build(path, _load, build, "this machine's bf16 measurement")[0]
        except _BusyMeasurement as busy:
            log.warning(
                "Other processes kept %.1f cores busy while bf16 was timed against fp32; this %s uses that "
                "measurement and does not keep it for the machine (trainer.precision=32-true or bf16-mixed decides "
                "without measuring).", busy.measurement.other_cores, "run" if sweep is None else "sweep",
            )  # fmt: skip
            return busy

    if sweep is None:
        found = measured()
        if isinstance(found, _BusyMeasurement):
            return Bf16Measurement(found.measurement.ratio, found.measurement.other_cores, "at start (not kept: busy)")
        return found

    def build_for_sweep(staging: Path) -> None:  # the machine's record, or the busy one for this sweep alone
        found = measured()
        if isinstance(found, _BusyMeasurement):
            busy = "when the sweep's first job measured it (busy: kept for this sweep alone)"
            _write(staging, found.measurement, busy)
        else:
            shutil.copy2(path / MEASUREMENT, staging / MEASUREMENT)

    entry = path.with_name(f"{path.name}-sweep-{hashlib.sha256(str(sweep).encode()).hexdigest()[:16]}")
    return load_or_build(entry, _load, build_for_sweep, "this sweep's bf16 measurement")[0]


def _write(folder: Path, measurement: Bf16Measurement, kept: str) -> None:
    cpu = this_cpu()
    measured_at = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    record = {"ratio": measurement.ratio, "other_cores": measurement.other_cores, "measured_at": measured_at,
              "kept": kept, "cpu": cpu.model, "cpu_flags": cpu.relevant_flags, "torch": torch.__version__,
              "threads": torch.get_num_threads()}  # fmt: skip
    (folder / MEASUREMENT).write_text(json.dumps(record, indent=1))


def _load(folder: Path) -> Bf16Measurement:
    record = json.loads((folder / MEASUREMENT).read_text())
    kept = record.get("kept", "when first measured on this machine")  # entries written before "kept" was recorded
    when = f"{kept}, {record['measured_at']}, kept in {folder}"
    return Bf16Measurement(float(record["ratio"]), record["other_cores"], when)
