"""The wheel carries every module and every config, so `python -m theseus_pl` works installed, not only here."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from theseus_pl.app.ship.offline_pack import build_project_wheel

ROOT = Path(__file__).parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel as the offline pack builds it (the one place this project's wheel is built)."""
    return build_project_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


def test_wheel_holds_every_module_and_config_and_nothing_else(wheel):
    names = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith((".py", ".yaml"))}
    package = ROOT / "src" / "theseus_pl"
    modules = {str(path.relative_to(package.parent)) for path in package.rglob("*.py")}
    # The top-level conf/ (src/theseus_pl/conf links to it) is installed as the package theseus_pl.conf: Hydra loads
    # it from there.
    configs = {f"theseus_pl/conf/{path.relative_to(ROOT / 'conf')}" for path in (ROOT / "conf").rglob("*")
               if path.suffix in (".py", ".yaml")}  # fmt: skip
    plugins = {str(path.relative_to(ROOT / "src")) for path in (ROOT / "src" / "hydra_plugins").rglob("*.py")}
    assert "theseus_pl/conf/__init__.py" in names
    assert names == {*modules, *configs, *plugins}, sorted(names ^ {*modules, *configs, *plugins})


def test_the_wheel_ships_no_file_an_earlier_build_left_in_build(tmp_path):
    """setuptools builds in the checkout's build/ and shipped what an earlier build left there: a module deleted from
    src/ since still ran on the GPU node from the offline pack's wheel."""
    project = tmp_path / "project"
    (project / "src" / "tiny_package").mkdir(parents=True)
    (project / "src" / "tiny_package" / "__init__.py").write_text("")
    (project / "build" / "lib" / "tiny_package").mkdir(parents=True)
    (project / "build" / "lib" / "tiny_package" / "deleted_since.py").write_text("")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tiny_package"\nversion = "0.1"\nreadme = "README.md"\n'
    )
    with pytest.raises(ValueError, match=r"lacks README\.md: its wheel cannot be built from it\.$"):
        build_project_wheel(project, tmp_path / "wheels")  # a traceback, after the model's weights were copied
    (project / "README.md").write_text("A tiny package.")
    built = build_project_wheel(project, tmp_path / "wheels")
    assert built.parent == tmp_path / "wheels" and [path.name for path in built.parent.iterdir()] == [built.name]
    assert [name for name in zipfile.ZipFile(built).namelist() if not name.startswith("tiny_package-0.1.dist-info/")] \
        == ["tiny_package/__init__.py"]  # fmt: skip


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
