"""The wheel carries every module and every config, so `python -m theseus_pl` works installed, not only here."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.slow


def test_wheel_holds_all_modules_and_configs(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)], check=True
    )
    (wheel,) = tmp_path.glob("theseus_pl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "src" / "theseus_pl"
    expected = {
        str(path.relative_to(package.parent))
        for path in package.rglob("*")
        if path.suffix in {".py", ".yaml"} and "__pycache__" not in path.parts
    }
    assert expected <= names, sorted(expected - names)
