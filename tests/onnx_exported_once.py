"""Each model torch's ONNX exporter writes, exported once a test run.

The deployment tests export the same few tiny models again and again (the shared tiny classifier, the tiny encoder,
a run's successor deployed and then redeployed by the command): 42 exports in the test processes of a run at
``4cd6f66``, 2-4 s each of torch.export's tracing and decompositions whatever the model's size, 100 s of the two
workers' 735 s in tests on the AVX-512 EPYC; the 41 of the deployment modules were of 17 models, 60 s of them spent
exporting a model exported before. The exporter is deterministic: the same module, weights, example and options give
the same bytes (in one process, ``tests/test_onnx_exported_once.py``; in two, by hand with torch 2.13). So
``torch.onnx.export`` is replaced here by a memo that keys a call by everything that decides its output and, for a
key exported before, copies the file written then. The key holds: each submodule's name, class and the code of its
``forward`` (a monkeypatched one changes it), its plain attributes (the training flag among them) and the hooks on
it; every parameter and buffer, by name, with its values, dtype and shape, and which share one tensor; the wrapped
model's config, less the folder it was loaded from (not in the graph); the example's tensors; every option but the
file. A call the memo does not cover (a target that is not a path, external data, the TorchScript exporter, keyword
inputs) is torch's own, as is every new key, and a failed export stores nothing.

The files live in a folder of the run's, shared by the workers (``conftest.py``) and by the command lines they fork
(``command_zygote.py``), each made once under a lock; a process started afresh (joblib's, submitit's, a DDP rank)
exports as users do. A hit returns ``None``, not torch's ``ONNXProgram``: the package reads only the file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

RUN_FOLDER = "THESEUS_PL_TEST_ONNX_EXPORTS"  # the variable naming the test run's folder of exported files
MEMO_FOLDER = "memo_folder"  # the attribute of the installed memo naming its folder
torch_onnx_export = torch.onnx.export  # torch's own, as this module is imported (before the memo replaces it)
PLAIN = (bool, int, float, str, type(None))
# Where transformers loaded a model from (the model's and its config's): the graph does not hold it, and each test
# loads its model from a folder of its own.
LOADED_FROM = frozenset({"name_or_path", "_name_or_path"})


def _plain(value: Any) -> bool:
    """Whether ``value`` is a setting written out in full by ``repr``: a number, a string, or lists of them."""
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    return isinstance(value, PLAIN)


def _bytes(tensor: torch.Tensor) -> bytes:
    """A tensor's values as bytes, whatever its dtype (numpy has no bfloat16)."""
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _const_bytes(const: Any) -> bytes:
    """A constant of a function's code as bytes, the same in every process (a nested function's ``repr`` holds its
    address)."""
    if isinstance(const, types.CodeType):
        return (
            repr((const.co_filename, const.co_firstlineno, const.co_name)).encode()
            + const.co_code
            + b"".join(_const_bytes(inner) for inner in const.co_consts)
        )
    return repr(const).encode()


def _module_key(model: torch.nn.Module, digest: Any) -> None:
    """Feed ``digest`` with what of ``model`` decides the exported graph."""
    for name, module in model.named_modules(remove_duplicate=False):
        forward = module.__dict__.get("forward", type(module).forward)
        code = getattr(forward, "__code__", None)
        digest.update(repr((name, type(module).__module__, type(module).__qualname__)).encode())
        if code is not None:
            digest.update(_const_bytes(code))
        plain = sorted((key, value) for key, value in vars(module).items() if _plain(value) and key not in LOADED_FROM)
        hooks = [  # torch's own attributes: the hooks a module's call runs around its forward
            getattr(hook, "__qualname__", repr(hook))
            for attribute in ("_forward_pre_hooks", "_forward_hooks")
            for hook in getattr(module, attribute, {}).values()
        ]
        digest.update(repr((plain, hooks)).encode())
        config = getattr(module, "config", None)
        if hasattr(config, "to_dict"):
            settings = {key: value for key, value in config.to_dict().items() if key not in LOADED_FROM}
            digest.update(repr(sorted(settings.items())).encode())
            digest.update(repr(getattr(config, "_attn_implementation", None)).encode())
    first: dict[int, str] = {}
    named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    for name, tensor in named:
        shared = first.setdefault(id(tensor), name)
        digest.update(repr((name, shared, tensor.dtype, tuple(tensor.shape))).encode() + _bytes(tensor))


def export_key(model: torch.nn.Module, args: tuple[torch.Tensor, ...], options: dict[str, Any]) -> str:
    """What decides the file ``torch.onnx.export(model, args, file, **options)`` writes, as a hex digest."""
    digest = hashlib.sha256(repr((torch.__version__, torch.get_default_dtype())).encode())
    _module_key(model, digest)
    for tensor in args:
        digest.update(repr((tensor.dtype, tuple(tensor.shape))).encode() + _bytes(tensor))
    digest.update(repr(sorted(options.items())).encode())
    return digest.hexdigest()


def _covered(model: Any, args: Any, file: Any, options: dict[str, Any]) -> bool:
    """Whether the memo takes this call: a module, positional tensors, one ONNX file at a path, torch.export."""
    return (
        isinstance(model, torch.nn.Module)
        and isinstance(args, tuple)
        and all(isinstance(tensor, torch.Tensor) for tensor in args)
        and isinstance(file, (str, os.PathLike))
        and options.get("dynamo", True) is True
        and options.get("external_data", True) is False
        and options.get("kwargs") is None
    )


def exported_once(export: Callable[..., Any], folder: Path) -> Callable[..., Any]:
    """``export`` (``torch.onnx.export``'s signature) writing each key's file once into ``folder``, copying it after:
    as the package's cache entries (built under a lock where two workers ask at once, whole or built again)."""

    @functools.wraps(export)
    def export_once(model: Any, args: Any = (), f: Any = None, **options: Any) -> Any:
        if not _covered(model, args, f, options):
            return export(model, args, f, **options)
        from theseus_pl.data.cache_entry import load_or_build  # as a command imports it, not before

        programs = []
        stored, _ = load_or_build(
            folder / export_key(model, args, options),
            load=lambda entry: entry / "model.onnx",  # the entry's manifest checks the file is whole
            build=lambda staging: programs.append(export(model, args, staging / "model.onnx", **options)),
            what="ONNX export",
        )
        shutil.copyfile(stored, f)
        return programs[0] if programs else None

    return export_once


def export_each_model_once(folder: Path) -> Path:
    """From now on in this process, ``torch.onnx.export`` exports each key once into ``folder`` (made if missing);
    the folder the process's exports go to is returned.

    Where this process has a memo already, its folder stays: a pytest run inside this one (pytester's, in
    ``tests/data/test_real_data_gate.py``) imports ``conftest.py`` anew, and a memo of its own, into its own folder,
    would have left every later export of this worker unseen by the other (10 models exported twice a run)."""
    installed = getattr(torch.onnx.export, MEMO_FOLDER, None)
    if installed is not None:
        return installed
    folder.mkdir(parents=True, exist_ok=True)
    memo = exported_once(torch_onnx_export, folder)
    setattr(memo, MEMO_FOLDER, folder)
    torch.onnx.export = memo
    return folder
