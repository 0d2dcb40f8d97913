"""The precision a run's Trainer gets: :mod:`theseus_pl.core.precision`'s rule, with its bf16 measurement taken once
per machine and kept in the cache.

Measured in each process, ``trainer.precision=auto`` let the jobs of one sweep disagree: started together, each timed
bf16 against fp32 while the others were starting up, and one chose fp32 (0.82x, over the 0.8x line) beside another's
bf16 (0.44x). They then fine-tuned two predecessors (the precision is part of a predecessor's cache key) and trained in
two precisions, which a sweep's comparison must not mix. The first job now measures under the cache's file lock while
the others wait, idle, and every later run on the machine reads what it found. The entry is keyed by what decides the
ratio: the CPU's model and flags, the torch version and the torch threads. A measurement that stayed busy (another
program kept the cores) is not kept for the machine: it is kept for the run's folder alone (its DDP ranks re-run the
command there, and a resume goes on there, in the precision it started in) and, in a sweep, for the sweep's other
jobs (so they still train in one precision); the next run or sweep measures again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
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


class _MachinesMeasurement(Exception):
    """Raised inside a folder's entry's build where the machine's kept measurement serves: nothing kept for it."""

    def __init__(self, measurement: Bf16Measurement) -> None:
        super().__init__("the machine's measurement serves")
        self.measurement = measurement


def run_precision(requested: str, accelerator: str, cache_dir: Path, shared_by: Sequence[Path] = ()) -> PrecisionChoice:
    """What ``trainer.precision`` means for a run on this machine, its bf16 measurement (where the rule needs one)
    kept under ``cache_dir``; as Lightning trains in it (``16-mixed`` on a CPU is bf16-mixed: no fp16 autocast
    there), so that the record says what the run trained in. ``shared_by``: the folders whose runs share one
    measurement (:func:`machine_bf16_measurement`)."""
    choice = resolve_precision(requested, accelerator, lambda: machine_bf16_measurement(cache_dir, shared_by))
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


def machine_bf16_measurement(cache_dir: Path, shared_by: Sequence[Path] = ()) -> Bf16Measurement:
    """:func:`~theseus_pl.core.precision.measure_bf16` for this machine: read from ``cache_dir/machine/`` when a run
    measured it before, else measured (one job of a sweep; the others wait for it) and kept there. ``shared_by``: the
    folders whose runs read one measurement, a busy one too, innermost first (the run's own folder, which its DDP
    ranks and its resumes run in; the sweep's); a busy measurement is kept for them alone."""
    cpu = this_cpu()
    identity = [cpu.model, cpu.relevant_flags, torch.__version__, torch.get_num_threads()]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    path = cache_dir / "machine" / f"bf16-{key}"

    def build(staging: Path) -> None:
        measurement = measure_bf16()
        if measurement.busy:
            raise _BusyMeasurement(measurement)
        _write(staging, measurement, "when first measured on this machine")

    def machines() -> Bf16Measurement:
        try:
            return load_or_build(path, _load, build, "this machine's bf16 measurement")[0]
        except _BusyMeasurement as busy:
            log.warning(
                "Other processes kept %.1f cores busy while bf16 was timed against fp32; this run uses that "
                "measurement and does not keep it for the machine (trainer.precision=32-true or bf16-mixed decides "
                "without measuring).", busy.measurement.other_cores,
            )  # fmt: skip
            return Bf16Measurement(busy.measurement.ratio, busy.measurement.other_cores, "at start (not kept: busy)")

    def shared(folders: Sequence[Path]) -> Bf16Measurement:
        """The measurement the runs of ``folders[0]`` share: the outer folders', the machine's, or, where that was
        busy, the one its first run took, kept for its runs (built under a lock: the others wait and read it)."""
        if not folders:
            return machines()
        entry = path.with_name(f"{path.name}-for-{hashlib.sha256(str(folders[0]).encode()).hexdigest()[:16]}")

        def build_shared(staging: Path) -> None:
            found = shared(folders[1:])
            if not found.busy:
                raise _MachinesMeasurement(found)  # the machine's entry serves: nothing kept for the folder
            if folders[1:]:  # an outer folder's, read by its runs in its words
                (staging / MEASUREMENT).write_text(json.dumps({**asdict(found), "copied": True}, indent=1))
            else:
                _write(staging, found, f"when the first run measured it in {folders[0]} (busy: kept for its runs)")

        try:
            return load_or_build(entry, _load, build_shared, f"the bf16 measurement of the runs in {folders[0]}")[0]
        except _MachinesMeasurement as machine:
            return machine.measurement

    return shared([folder.resolve() for folder in shared_by])


def _write(folder: Path, measurement: Bf16Measurement, kept: str) -> None:
    cpu = this_cpu()
    measured_at = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    record = {"ratio": measurement.ratio, "other_cores": measurement.other_cores, "measured_at": measured_at,
              "kept": kept, "cpu": cpu.model, "cpu_flags": cpu.relevant_flags, "torch": torch.__version__,
              "threads": torch.get_num_threads()}  # fmt: skip
    (folder / MEASUREMENT).write_text(json.dumps(record, indent=1))


def _load(folder: Path) -> Bf16Measurement:
    record = json.loads((folder / MEASUREMENT).read_text())
    if record.get("copied"):  # an inner folder's copy of its outer folder's, in the words it was read in
        return Bf16Measurement(float(record["ratio"]), record["other_cores"], record["when"])
    kept = record.get("kept", "when first measured on this machine")  # entries written before "kept" was recorded
    return Bf16Measurement(float(record["ratio"]), record["other_cores"], f"{kept}, {record['measured_at']}, kept in "
                                                                         f"{folder}")  # fmt: skip
