"""The floors hold: each imports only from the floors below it, the app's wings only from the wings below them, and
the core neither Lightning nor Hydra (``.importlinter``, run by CI as ``lint-imports``)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.slow


def lint_imports(package_root: Path) -> subprocess.CompletedProcess:
    """import-linter's command, the one installed beside the running interpreter (a venv's python runs the tests
    without the venv being activated: its ``bin/`` need not be on PATH)."""
    env = {**os.environ, "PYTHONPATH": str(package_root)}
    command = Path(sys.executable).with_name("lint-imports")
    command = command if command.is_file() else shutil.which("lint-imports")
    config = str(ROOT / ".importlinter")
    return subprocess.run([str(command), config, "--no-cache"], env=env, capture_output=True, text=True)


def test_the_package_keeps_its_contracts():
    result = lint_imports(ROOT / "src")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Contracts: 4 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "imported", "broken"),
    [
        ("core/schedules.py", "theseus_pl.app.run.pipeline", "Floors"),  # the core reaching up to the app
        ("data/tasks.py", "theseus_pl.lightning.metrics", "Floors"),  # data reaching up to Lightning's floor
        ("core/io.py", "lightning.pytorch", "The core runs on torch and transformers alone"),
        ("app/results/envelope.py", "theseus_pl.app.run.pipeline", "App wings"),  # the records reaching up to the run
        ("app/methods/schedules.py", "theseus_pl.app.checks.settings", "App wings"),  # a method reaching up to checks
        ("app/kinds/embedding_model/card.py", "theseus_pl.app.kinds.task_model", "Kinds"),  # one kind using another
        ("app/report/tables.py", "theseus_pl.app.kinds.embedding_model.report", "App wings"),  # a wing using a kind
    ],
)
def test_an_import_against_the_floors_breaks_a_contract(tmp_path, module, imported, broken):
    package = shutil.copytree(ROOT / "src" / "theseus_pl", tmp_path / "theseus_pl", symlinks=True)
    path = package / module
    path.write_text(path.read_text() + f"\nimport {imported}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert f"{broken}" in result.stdout.split("Broken contracts", 1)[1], result.stdout[-3000:]
