"""The package's command lines run by tests as a shell runs them, each in a process of its own, without paying for a
fresh interpreter's imports each time.

:func:`run_command` takes what ``subprocess.run(command, capture_output=True, text=True, ...)`` takes and returns
what it returns; :func:`start_command` starts one and returns at once (``.wait()`` gives the same), for commands that
must run side by side. A ``python -m theseus_pl...`` command is forked from a process that imported torch, transformers,
Hydra and Lightning's dependencies once (``command_zygote.py``, one per pytest worker); anything else, or a command
whose environment changes a variable those libraries read as they are imported, runs as a real subprocess. The
entry points' own start keeps real-process tests (``tests/test_packaging.py``, the console's lines in
``tests/app/test_app.py``).

A forked command also starts knowing this machine's bf16 measurement (``theseus_pl.core.precision.measure_bf16``),
taken once by the test's process where ``trainer.precision=auto`` needs one (a CPU with AVX-512 BF16 and no AMX), as a
fresh process of a machine whose cache holds it: measured in every command, beside the other worker's tests, it took
22.8 s and 27.8 s there with both cores busy (the busy machine's retries). The measurement's own tests run it in
real processes.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ZYGOTE = Path(__file__).with_name("command_zygote.py")
# The environment the forking process imported its libraries under: a command whose environment differs from it in
# a variable read at import (the Hugging Face libraries' offline switches and paths, torch's threads, Python's own
# start-up settings) would not see that difference in a fork, so it gets a real process.
START_ENV = dict(os.environ)
READ_AT_IMPORT = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS", "TORCH", "PYTORCH", "OMP_", "MKL_", "KMP_",
                  "OPENBLAS", "CUDA", "LD_", "TQDM", "PYTHON", "MPL", "ACCELERATE", "ORT_")  # fmt: skip
EMULATED = {"PYTHONPATH"}  # the fork puts $PYTHONPATH on sys.path as Python's start does
# Set by libraries as they are imported, which the forking process leaves to each command: a test's process that
# imported them has these, and the command's own import sets them again. Lightning's; and lm-eval's (setdefault),
# which only tunes hub downloads, none of which a test makes: without it here, every command after a test that
# imported lm-eval started a real process (15 in one run of the suite, about 8 s each on the AVX2-only EPYC).
SET_BY_LIBRARIES = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1", "HF_XET_HIGH_PERFORMANCE": "1"}

_zygote: subprocess.Popen | None = None
_unread = bytearray()  # what the zygote wrote past the last line read
_set_by_imports: dict[str, str] = {}  # the variables the zygote's imports set, and their values
_ended: dict[int, int] = {}  # forked commands that ended and were not yet waited for: pid -> exit status


def run_command(command: list[str], *, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
                timeout: float | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``command`` run as ``subprocess.run(command, capture_output=True, text=True, ...)`` runs it."""
    return start_command(command, cwd=cwd, env=env).wait(timeout, check)


def start_command(
    command: list[str], *, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
) -> Started:
    """``command`` started as ``subprocess.Popen(command, stdout=PIPE, stderr=PIPE, text=True, ...)`` starts it."""
    environment = dict(os.environ if env is None else env)
    if not _forkable(command, environment):
        popen = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return Started(command, popen=popen)
    folder = Path(tempfile.mkdtemp(prefix="command-"))
    request = {"module": command[2], "arguments": command[3:], "cwd": os.fspath(cwd or os.getcwd()),
               "env": environment, "stdout": str(folder / "stdout"), "stderr": str(folder / "stderr"),
               "bf16": _machine_bf16()}  # fmt: skip
    zygote = _started_zygote()
    os.write(zygote.stdin.fileno(), (json.dumps(request) + "\n").encode())
    while "returncode" in (answer := _answer(zygote, None)):  # another command's end, read before this one's start
        _ended[answer["pid"]] = answer["returncode"]
    return Started(command, pid=answer["pid"], folder=folder)


@dataclass
class Started:
    """A command started by :func:`start_command`: a real process (``popen``), or a fork of the zygote (``pid``, its
    output in files under ``folder``)."""

    command: list[str]
    popen: subprocess.Popen | None = None
    pid: int | None = None
    folder: Path | None = None

    def wait(self, timeout: float | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        """What ``subprocess.run`` returns once the command ends; killed, and ``TimeoutExpired``, after ``timeout``."""
        if self.popen is not None:
            try:
                out, err = self.popen.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.communicate()
                raise
            completed = subprocess.CompletedProcess(self.command, self.popen.returncode, out, err)
        else:
            try:
                returncode = _forked_end(self.pid, timeout)
                if returncode is None:
                    os.kill(self.pid, signal.SIGKILL)
                    _forked_end(self.pid, None)
                    raise subprocess.TimeoutExpired(self.command, timeout, *self._output())
                completed = subprocess.CompletedProcess(self.command, returncode, *self._output())
            finally:
                shutil.rmtree(self.folder, ignore_errors=True)
        if check:
            completed.check_returncode()
        return completed

    def _output(self) -> tuple[str, str]:
        return _read(self.folder / "stdout"), _read(self.folder / "stderr")


def _forkable(command: list[str], environment: dict[str, str]) -> bool:
    """Whether ``command`` in ``environment`` starts in a fork as it would in a fresh process: a theseus_pl module,
    each variable read at import as the forking process's libraries read it. A variable those libraries set as they
    were imported (torch's ``TORCHINDUCTOR_CACHE_DIR``, Lightning's ``PYTORCH_NVML_BASED_CUDA_CHECK``, lm-eval's
    ``HF_XET_HIGH_PERFORMANCE``; a test's process has them once it imported the same libraries) may be absent or hold
    what they set."""
    if len(command) < 3 or command[:2] != [sys.executable, "-m"] or command[2].split(".")[0] != "theseus_pl":
        return False
    _started_zygote()
    keys = {key for key in START_ENV.keys() | environment.keys() if key.startswith(READ_AT_IMPORT)} - EMULATED
    return all(
        environment.get(key) == START_ENV.get(key)
        or (key in _set_by_imports and environment.get(key) in (None, _set_by_imports[key]))
        for key in keys
    )


def _forked_end(pid: int, timeout: float | None) -> int | None:
    """The exit status of the forked command ``pid`` (others' ends read meanwhile are kept for their waits); None when
    ``timeout`` seconds pass first."""
    zygote = _started_zygote()
    deadline = None if timeout is None else time.monotonic() + timeout
    while pid not in _ended:
        answer = _answer(zygote, None if deadline is None else max(0.0, deadline - time.monotonic()))
        if answer is None:
            return None
        _ended[answer["pid"]] = answer["returncode"]
    return _ended.pop(pid)


def _answer(zygote: subprocess.Popen, timeout: float | None) -> dict | None:
    """The zygote's next line, read straight from its pipe (no buffer that ``select`` cannot see); None when
    ``timeout`` seconds pass first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in _unread:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and (left <= 0 or not select.select([zygote.stdout], [], [], left)[0]):
            return None
        chunk = os.read(zygote.stdout.fileno(), 4096)
        if not chunk:
            raise RuntimeError(f"{ZYGOTE.name} ended unasked (status {zygote.wait()})")
        _unread.extend(chunk)
    line, _, rest = bytes(_unread).partition(b"\n")
    _unread[:] = rest
    return json.loads(line)


def _started_zygote() -> subprocess.Popen:
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        _unread.clear()
        _ended.clear()
        _zygote = subprocess.Popen([sys.executable, str(ZYGOTE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env=START_ENV)  # fmt: skip
        atexit.register(_zygote.stdin.close)
        imported = _answer(_zygote, None)["env"]
        _set_by_imports.clear()
        _set_by_imports.update({key: value for key, value in imported.items() if START_ENV.get(key) != value})
        _set_by_imports.update(SET_BY_LIBRARIES)
    return _zygote


@functools.cache
def _machine_bf16() -> tuple[float, float | None] | None:
    """This machine's bf16 measurement (ratio, other processes' cores), where ``trainer.precision=auto`` needs one;
    taken in this process (the zygote runs no torch operation: its children's thread pools would break)."""
    from theseus_pl.core.precision import measure_bf16, resolve_precision

    taken = []
    resolve_precision("auto", "cpu", lambda: taken.append(measure_bf16()) or taken[0])
    return (taken[0].ratio, taken[0].other_cores) if taken else None


def seed_machine_bf16(cache_dir: Path) -> Path:
    """``cache_dir`` (returned) holding this process's bf16 measurement as the machine's, for each torch thread count a
    fresh process may start with: a joblib worker, a submitit job, the offline pack's runs
    read it as on a machine that measured before, where each would measure anew beside the other worker's tests
    (the 22.8-27.8 s above). Kept as a calm one: a busy one is kept for its folders alone. Nothing where ``auto``
    needs no measurement (AMX, AVX2)."""
    measured = _machine_bf16()
    if measured is None:
        return cache_dir
    from unittest import mock

    import torch

    from theseus_pl.core.precision import Bf16Measurement
    from theseus_pl.lightning import precision

    threads = torch.get_num_threads()
    try:
        with mock.patch.object(precision, "measure_bf16", lambda: Bf16Measurement(measured[0], None)):
            for count in range(1, (os.cpu_count() or 1) + 1):
                torch.set_num_threads(count)  # part of the entry's key
                precision.machine_bf16_measurement(cache_dir)
    finally:
        torch.set_num_threads(threads)
    return cache_dir


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
