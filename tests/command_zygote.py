"""A process that imports the libraries every command line of the package loads (torch, transformers, Hydra, and
Lightning's own dependencies) once, then forks one child per command line a test asks for: each child becomes
``python -m <module> <arguments>`` as a shell would start it, with the libraries already in memory (8-15 s of
imports saved per command on a 2-core CPU). Used by :func:`command_runs.run_command`.

Nothing of theseus_pl, and nothing of Lightning's own package, is imported here, so each command imports those as
a fresh process does: Lightning sets up its loggers at import by whether the root logger has handlers yet, which
depends on when the command imports it. This process never runs a torch operation, so its children start with no
OpenMP thread pool that a fork would break.

The protocol, JSON lines on stdin and on the stdout this process started with (its own fd 1 then goes to stderr: a
library may print as it is imported, transformers does under ``WANDB_MODE=offline``): ``{"env": ...}`` first, the
environment once the libraries are imported (some set variables of their own); then per request ``{"module",
"arguments", "cwd", "env", "stdout", "stderr"}`` (the last two are files the child writes), answered by
``{"pid": ...}`` as the child starts and ``{"pid": ..., "returncode": ...}`` as it ends. Children run side by side (a
test may start two commands at once): the next request is read while earlier children run, and their ends are
answered in the order they come. End of stdin ends this process. A request's ``bf16`` (the test process's bf16
measurement, or null) is what the child's ``measure_bf16`` returns.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import runpy
import selectors
import signal
import sys
import threading
from pathlib import Path
from typing import TextIO

from onnx_exported_once import RUN_FOLDER, export_each_model_once

PRELOADED = (
    "torch",
    "torch._dynamo",
    "transformers",
    "torchmetrics",
    "scipy.signal",
    "sympy",
    "pandas",
    "hydra",
    "omegaconf",
    "accelerate",
    "datasets",
    "matplotlib.pyplot",
    "onnx",
    "onnxruntime",
    "sentence_transformers",
)


def serve(replies: TextIO) -> dict:
    """Answer requests on stdin until it ends (then exit); return a request only in the child forked for it. A child's
    end wakes this process (SIGCHLD, written to a pipe watched beside stdin), so one still running holds up neither
    the next request nor another's end."""
    for name in PRELOADED:
        __import__(name)
    # What every child shares, frozen: a child's full garbage collections skip it, and touch none of its pages
    # (which a fork shares until written)
    gc.collect()
    gc.freeze()
    answer(replies, {"env": dict(os.environ)})  # with what the imports set (TORCHINDUCTOR_CACHE_DIR, ...)
    base_path = [entry for entry in sys.path[1:] if entry not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    ended, ended_signal = os.pipe()
    os.set_blocking(ended_signal, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # handled, so that Python writes it to the wake-up pipe
    signal.set_wakeup_fd(ended_signal)
    unread = b""
    with selectors.DefaultSelector() as selector:
        selector.register(0, selectors.EVENT_READ)
        selector.register(ended, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fd == ended:
                    os.read(ended, 1 << 10)
                    answer_ended(replies)
                    continue
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    raise SystemExit(0)
                unread += chunk
                while b"\n" in unread:
                    line, _, unread = unread.partition(b"\n")
                    request = json.loads(line)
                    sys.stdout.flush()
                    pid = os.fork()
                    if pid == 0:
                        replies.close()
                        signal.set_wakeup_fd(-1)
                        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                        os.close(ended)
                        os.close(ended_signal)
                        request["base_path"] = base_path
                        return request
                    answer(replies, {"pid": pid})


def answer_ended(replies: TextIO) -> None:
    """Answer each child that has ended: one wake-up may stand for several."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left
            return
        if pid == 0:
            return
        answer(replies, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def answer(replies: TextIO, message: dict) -> None:
    replies.write(json.dumps(message) + "\n")
    replies.flush()


def become(request: dict) -> None:
    """This child as ``python -m module arguments`` started in ``cwd`` with ``env``, its output in the files named."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, name in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # python -m: the working folder first, then $PYTHONPATH, then the interpreter's own folders
    python_path = [entry for entry in request["env"].get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = [os.getcwd(), *python_path, *request["base_path"]]
    sys.argv = ["-m", *request["arguments"]]  # runpy puts the module's file first, as python -m does
    if folder := os.environ.get(RUN_FOLDER):  # the test run's ONNX exports, as in the test's own process
        export_each_model_once(Path(folder))
    if request["bf16"] is not None:  # the core imports neither Lightning nor Hydra: nothing set up before its time
        from theseus_pl.core import precision

        measured = precision.Bf16Measurement(*request["bf16"])
        precision.measure_bf16 = lambda: measured


def run_as_main(module: str) -> int:
    """Run ``module`` as ``python -m`` does; its exit status, with what Python prints for a message or an exception."""
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exited:
        if exited.code is None or isinstance(exited.code, int):
            return exited.code or 0
        print(exited.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def leave(status: int) -> None:
    """End this child as the interpreter ends a process, less the freeing of every module (seconds, and it can
    hang: a library's native threads were not copied into the fork, and freeing it joins them). CPython's own steps:
    wait for the threads, run the ``atexit`` functions, flush the output."""
    threading._shutdown()  # private: the interpreter's own wait for non-daemon threads, as at a normal exit
    atexit._run_exitfuncs()  # private: what the interpreter calls next
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


if __name__ == "__main__":
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    child = serve(protocol)
    become(child)
    leave(run_as_main(child["module"]))
