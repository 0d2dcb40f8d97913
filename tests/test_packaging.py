"""The wheel carries every module and every config, so `python -m theseus_pl` works installed, not only here."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(folder)], check=True)
    (built,) = folder.glob("theseus_pl-*.whl")
    return built


def test_wheel_holds_all_modules_and_configs(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "src" / "theseus_pl"
    modules = {str(path.relative_to(package.parent)) for path in package.rglob("*.py")}
    # The top-level conf/ is installed as the package theseus_pl.conf: Hydra loads it from there.
    configs = {f"theseus_pl/conf/{path.relative_to(ROOT / 'conf')}" for path in (ROOT / "conf").rglob("*.yaml")}
    assert "theseus_pl/conf/__init__.py" in names
    assert {*modules, *configs} <= names, sorted({*modules, *configs} - names)


def test_the_installed_wheel_runs_the_app_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)], check=True
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import theseus_pl; print(theseus_pl.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(site)), where.stdout
    for experiment in ("demo", "rte_curriculum"):  # test_app composes every experiment; here: found installed
        composed = subprocess.run(
            [sys.executable, "-m", "theseus_pl", f"+experiment={experiment}", "--cfg", "job", "--resolve"],
            cwd=tmp_path, env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert composed.returncode == 0, composed.stderr[-2000:]
        assert "schedule_steps" in composed.stdout
    # The console scripts beside python -m: the app, and each CLI answering --help.
    composed = subprocess.run(
        [str(site / "bin" / "theseus-pl"), "+experiment=demo", "--cfg", "job"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert composed.returncode == 0 and "schedule_steps" in composed.stdout, composed.stderr[-2000:]
    for command in ("theseus-pl-deploy", "theseus-pl-publish", "theseus-pl-report", "theseus-pl-submit"):
        helped = subprocess.run([str(site / "bin" / command), "--help"], env=env, capture_output=True, text=True)
        assert helped.returncode == 0 and helped.stdout.startswith("usage:"), (command, helped.stderr[-2000:])


def test_every_public_name_imports_from_the_package():
    """Each name of ``theseus_pl.__all__`` (the core's, and the two Lightning pieces) imports by its name."""
    import theseus_pl

    assert sorted(theseus_pl._EXPORTS) == theseus_pl.__all__
    for name in theseus_pl.__all__:
        assert getattr(theseus_pl, name).__name__ == name
