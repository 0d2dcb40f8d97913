"""The library example in the docs runs as it stands, with neither Lightning nor Hydra imported; nor does any module
of the core import them (the core is a library of torch and transformers alone: `.importlinter`'s core-alone contract
says so of every import statement, this of what the modules and their own dependencies load when run)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoConfig

pytestmark = pytest.mark.quick

DOCS = Path(__file__).parents[2] / "docs" / "library.md"
FORBIDDEN = ("lightning", "pytorch_lightning", "hydra", "omegaconf", "torchmetrics")


def library_example() -> str:
    (code,) = re.findall(r"```python\n(.+?)\n```", DOCS.read_text(), re.S)
    return code


def test_the_example_is_about_twenty_lines():
    assert len(library_example().splitlines()) <= 26


@pytest.mark.slow
def test_the_library_example_and_every_core_module_run_without_lightning_or_hydra(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(library_example())
    check = (
        f"import importlib, pkgutil, runpy, sys; runpy.run_path({str(script)!r}); import theseus_pl.core; "
        "core = pkgutil.walk_packages(theseus_pl.core.__path__, 'theseus_pl.core.'); "
        "[importlib.import_module(module.name) for module in core]; "
        f"loaded = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "print('LOADED', loaded)"
    )
    result = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "LOADED []" in result.stdout
    assert AutoConfig.from_pretrained(tmp_path / "successor").num_hidden_layers == 3
    assert AutoConfig.from_pretrained(tmp_path / "successor").intermediate_size == 768
