"""What a GPU node without network needs to run the paper's grid, packed on a connected machine as pieces of a chosen
size: such nodes take files only by copy, often in pieces of limited size.

The pack holds the wheels the node lacks (downloaded for its Python, or built here where a package ships only as a
source archive), this project as a wheel, the base model's weights in fp16 (half the bytes; every run fine-tunes with
fp32 weights, :func:`~theseus_pl.app.predecessors.classifier.load_classifier`) and the GLUE task folders. It is one
tar file cut into ``pack.tar.000``, ``.001``, … beside ``pieces.sha256`` and ``unpack.sh``, a shell script (the node
has no theseus_pl until it runs) that checks the pieces, joins and unpacks them, and installs the wheels offline.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from theseus_pl.app.results.envelope import Keys, ResultsError, plain
from theseus_pl.app.results.field_types import check_types
from theseus_pl.data.cache_entry import MANIFEST
from theseus_pl.data.sources import GlueDirSource, is_test_split
from theseus_pl.data.tasks import glue_task

log = logging.getLogger(__name__)

# What a node with PyTorch, transformers, Lightning, pandas and pyarrow still lacks to run this project: this
# workplace's GPU image (torch 2.11, transformers 5.17, lightning 2.6.6, huggingface_hub 1.33, Python 3.12) lacks
# these. Versions that install beside that image; W&B is left out (runs log to CSV without it).
NODE_WHEELS = (
    "hydra-core==1.3.8",
    "omegaconf==2.3.1",
    "antlr4-python3-runtime==4.9.3",  # a source archive only: built here into a pure-Python wheel
    "hydra-joblib-launcher==1.2.0",
    "datasets==5.2.0",
    "dill==0.4.1",
    "multiprocess==0.70.19",
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
PIECE_PREFIX = "pack.tar."
CHECKSUMS = "pieces.sha256"
UNPACK_SCRIPT = """#!/usr/bin/env bash
# Check the pieces beside this script, join and unpack them into DEST (default: ./unpacked beside it), and install
# the wheels offline (into $PIP_TARGET when set: then put it on PYTHONPATH). Then run the grid:
#   python3 -m theseus_pl.offline run DEST --output DEST/runs
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/unpacked}
(cd "$here" && sha256sum --check --quiet pieces.sha256)
mkdir -p "$dest"
cat "$here"/pack.tar.* | tar -x -C "$dest"
python3 -m pip install --quiet --no-index --no-deps --no-compile ${PIP_TARGET:+--target "$PIP_TARGET"} \\
    "$dest"/wheels/*.whl
echo "Unpacked into $dest and installed $(ls "$dest"/wheels | wc -l) wheels."
"""


PACK_RECORD = "pack.json"  # what the node's run reads of the pack


@dataclass(frozen=True)
class PackRecord:
    """``pack.json``: what the node's run reads of the pack (the rest is in its folders)."""

    tasks: list[str]  # the GLUE task folders packed
    hub_id: str | None = None  # the model's hub id, for its card's base_model


def read_pack_record(unpacked: Path) -> PackRecord:
    """The pack's record in the folder ``unpack.sh`` unpacked into, each value of its type; a
    :class:`~theseus_pl.app.results.envelope.ResultsError` naming the file and the key otherwise."""
    path = unpacked / PACK_RECORD
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ResultsError(
            f"{unpacked} holds no readable {PACK_RECORD} ({error}): give the folder unpack.sh unpacked into."
        ) from None
    try:
        record = PackRecord(**Keys(data, "", PACK_RECORD).pick(PackRecord))
        check_types(record)
    except ResultsError as error:
        raise ResultsError(f"{path}: {error}; unpack the pack again.") from None
    return record


def half_precision_copy(model_dir: Path, destination: Path) -> None:
    """``model_dir``'s files in ``destination``, its fp32 safetensors tensors stored as fp16."""
    destination.mkdir(parents=True)
    for file in sorted(model_dir.iterdir()):
        if file.suffix == ".safetensors":
            tensors = load_file(file)
            halved = {name: t.half() if t.dtype == torch.float32 else t for name, t in tensors.items()}
            save_file(halved, destination / file.name, metadata={"format": "pt"})
        elif file.is_file() and file.name != MANIFEST:  # a cache entry's own record, not the model's
            shutil.copy2(file, destination / file.name)
        elif file.is_dir():
            shutil.copytree(file, destination / file.name)


def glue_tasks_problem(glue_dir: Path, tasks: Sequence[str]) -> str | None:
    """What is wrong with packing ``tasks`` from ``glue_dir``: the task folders it lacks, by name, or a labelled
    split's file a task folder lacks (each job trains and scores on them: on the node, every job failed); None:
    nothing."""
    missing = [task for task in tasks if not (glue_dir / task).is_dir()]
    if missing:
        return f"{glue_dir} has no folder {', '.join(missing)}: give --glue-dir the GLUE folder."
    source = GlueDirSource(glue_dir)
    for task in map(glue_task, tasks):
        for split in [split for split in task.tsv.files if not is_test_split(split)] if task.tsv else []:
            try:
                source.path(task, split)
            except FileNotFoundError as error:
                return f"{error}: give --glue-dir the GLUE folder, each task with its training and dev files."
    return None


def copy_glue_tasks(glue_dir: Path, tasks: Sequence[str], destination: Path) -> None:
    """Each task's folder of ``glue_dir`` (its TSV files) in ``destination``; a missing one is refused by name."""
    problem = glue_tasks_problem(glue_dir, tasks)
    if problem:
        raise ValueError(problem)
    for task in tasks:
        (destination / task).mkdir(parents=True)
        for file in (glue_dir / task).glob("*.tsv"):
            shutil.copy2(file, destination / task / file.name)


PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet")


def fetch_wheels(specs: Sequence[str], python: str, project_root: Path, destination: Path) -> None:
    """Wheels of ``specs`` for CPython ``python`` on x86-64 Linux, and of this project, into ``destination``. A
    package with no wheel on the index is built here (pure-Python source archives build for any Python 3)."""
    destination.mkdir(parents=True, exist_ok=True)
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    for spec in specs:
        download = [*PIP, "download", "--no-deps", "--only-binary=:all:", "--python-version", python,
                    "--implementation", "cp", *platforms, "--dest", str(destination), spec]  # fmt: skip
        if subprocess.run(download, capture_output=True, check=False).returncode != 0:
            log.info("%s has no wheel for Python %s on the index: building one here", spec, python)
            _pip(["wheel", "--no-deps", "--wheel-dir", str(destination), spec], spec)
    build_project_wheel(project_root, destination)


# What setuptools reads to build this project's wheel: pyproject.toml names the README and the src/ layout; the
# license files it takes by its default patterns go along where there are any.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "src")
LICENSE_FILES = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")


def build_project_wheel(project_root: Path, destination: Path) -> Path:
    """The wheel of the project at ``project_root``, built into ``destination`` from a copy of its sources: setuptools
    builds in the checkout's ``build/`` and ships whatever an earlier build left there (a module deleted from
    ``src/`` since, which would then still run on the node)."""
    destination.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=destination, prefix=".build-") as scratch:
        source, built = Path(scratch) / "source", Path(scratch) / "wheel"
        source.mkdir()
        if missing := [name for name in WHEEL_SOURCES if not (project_root / name).exists()]:
            raise ValueError(f"{project_root} lacks {', '.join(missing)}: its wheel cannot be built from it.")
        licenses = [path.name for pattern in LICENSE_FILES for path in project_root.glob(pattern) if path.is_file()]
        for name in [*WHEEL_SOURCES, *licenses]:
            if (project_root / name).is_dir():  # symlinks followed: src/theseus_pl/conf is the top-level conf/
                shutil.copytree(project_root / name, source / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
            else:
                shutil.copy2(project_root / name, source / name)
        _pip(["wheel", "--no-deps", "--wheel-dir", str(built), str(source)], f"the wheel of {project_root}")
        (wheel,) = built.glob("*.whl")
        return Path(shutil.move(wheel, destination / wheel.name))


def _pip(arguments: list[str], what: str) -> None:
    done = subprocess.run([*PIP, *arguments], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"pip could not fetch or build {what}: {last}")


def cut_into_pieces(staging: Path, output: Path, piece_bytes: int) -> list[Path]:
    """``staging``'s contents as one tar file cut into pieces of at most ``piece_bytes`` in ``output``, with their
    SHA-256 sums in ``pieces.sha256`` and ``unpack.sh`` beside them."""
    tar_path = output / "pack.tar"
    with tarfile.open(tar_path, "w") as archive:
        for path in sorted(staging.iterdir()):
            archive.add(path, arcname=path.name)
    pieces, sums = [], []
    with tar_path.open("rb") as whole:
        while chunk := whole.read(piece_bytes):
            piece = output / f"{PIECE_PREFIX}{len(pieces):03d}"
            piece.write_bytes(chunk)
            pieces.append(piece)
            sums.append(f"{hashlib.sha256(chunk).hexdigest()}  {piece.name}")
    tar_path.unlink()
    (output / CHECKSUMS).write_text("\n".join(sums) + "\n")
    script = output / "unpack.sh"
    script.write_text(UNPACK_SCRIPT)
    script.chmod(0o755)
    return pieces


def pack_folder_problem(output: Path) -> str | None:
    """Why ``output`` cannot take a pack, or None: the pieces and their checksums must be all it holds (unpack.sh
    joins every ``pack.tar.*`` there), so a file or a folder holding anything is refused, by the dry run too."""
    if output.exists() and not output.is_dir():
        return f"{output} is a file: give pack a new folder."
    if output.is_dir() and any(output.iterdir()):
        return f"{output} is not empty: give pack a new folder."
    return None


def build_pack(
    output: Path,
    model_dir: Path,
    glue_dir: Path,
    tasks: Sequence[str],
    python: str,
    wheels: Sequence[str],
    project_root: Path,
    piece_mb: float,
    record: PackRecord,
) -> list[Path]:
    """The pack in ``output`` (an empty or new folder): its pieces, in order. ``record`` goes in as ``pack.json``."""
    if problem := pack_folder_problem(output):
        raise ValueError(problem)
    staging = output / ".staging"
    staging.mkdir(parents=True)
    try:
        log.info("Copying the model's weights in fp16, the GLUE tasks and the wheels into %s", staging)
        half_precision_copy(model_dir, staging / "model")
        copy_glue_tasks(glue_dir, tasks, staging / "glue")
        fetch_wheels(wheels, python, project_root, staging / "wheels")
        (staging / PACK_RECORD).write_text(json.dumps(plain(record), indent=1))
        return cut_into_pieces(staging, output, int(piece_mb * 1024 * 1024))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
