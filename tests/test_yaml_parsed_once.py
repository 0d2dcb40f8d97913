"""The suite parses each YAML text once (``yaml_parsed_once``): what a test composes or loads must be what OmegaConf
itself would give, a fresh object each time, and a bad file must fail as it would."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml_parsed_once
from omegaconf import OmegaConf

import theseus_pl

pytestmark = pytest.mark.quick

CONFIG_FILES = sorted((Path(theseus_pl.__file__).parent / "conf").rglob("*.yaml"))


def test_every_config_file_loads_as_omegaconf_parses_it_into_a_fresh_object_each_time(monkeypatch):
    monkeypatch.setattr(yaml_parsed_once, "_parsed", {})  # each file's first load below a parse, not a copy
    assert OmegaConf.load is not yaml_parsed_once.omegaconf_load  # conftest.py installed the memo
    assert len(CONFIG_FILES) > 100
    for path in CONFIG_FILES:
        with path.open(encoding="utf-8") as stream:  # as Hydra reads its config sources, the first time
            first = OmegaConf.load(stream)
        second = OmegaConf.load(path)
        parsed = (first, second, yaml_parsed_once.omegaconf_load(path))
        # As written: `==` resolves interpolations, and `${now:...}` resolved twice can straddle a second
        written = [OmegaConf.to_container(config, resolve=False) for config in parsed]
        assert written[0] == written[1] == written[2], path
        first["changed_by_a_test"] = True  # which changes nothing another test loads
        assert "changed_by_a_test" not in OmegaConf.load(path) and "changed_by_a_test" not in second


def test_a_bad_or_missing_file_fails_as_omegaconf_fails_naming_it(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    for path in (bad, tmp_path / "missing.yaml"):
        with pytest.raises(Exception) as memoized:
            OmegaConf.load(path)
        with pytest.raises(Exception) as original:
            yaml_parsed_once.omegaconf_load(path)
        assert type(memoized.value) is type(original.value) and str(memoized.value) == str(original.value)
        assert path.name in str(memoized.value)
