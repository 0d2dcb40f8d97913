"""Before anything trains, every missing model, tokenizer and data source is named at once, with its fix."""

import os
import subprocess
import sys
import time

import pytest
from app_runs import compose_config, tiny_run_overrides
from huggingface_hub import constants

from theseus_pl.app.checks.refused import RunRefused
from theseus_pl.app.checks.resources import resource_problems
from theseus_pl.app.run.pipeline import run


@pytest.fixture
def empty_hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def offline(empty_hub_cache, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return empty_hub_cache


def cache_repo(cache, repo_type, repo_id, filename):
    """A repository in the hub cache's layout: the blob, a snapshot linking to it, the ref."""
    repo = cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "0123").write_text("{}")
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "snapshots" / "abc" / filename).symlink_to(repo / "blobs" / "0123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")


def test_offline_names_the_model_the_tokenizer_and_the_dataset_in_one_message(offline, tmp_path):
    with pytest.raises(RunRefused) as raised:
        run(compose_config("+experiment=rte_curriculum", f"paths.cache_dir={tmp_path / 'cache'}",
                           f"paths.output_dir={tmp_path / 'run'}"))  # fmt: skip
    message = str(raised.value)
    assert "model.base='bert-base-uncased' (model and tokenizer): not in the local Hugging Face cache" in message
    assert "HF_HUB_OFFLINE is set" in message and "Fix: model=minilm" in message
    assert "RTE from the hub dataset 'nyu-mll/glue'" in message and "data.glue_dir=PATH" in message
    assert "data.files=" in message
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    assert not (tmp_path / "cache").exists()


def test_cached_hub_resources_pass_offline(offline):
    cache_repo(offline, "model", "org/model", "config.json")
    cache_repo(offline, "dataset", "nyu-mll/glue", "README.md")
    assert resource_problems(compose_config("model.base=org/model", "data.task=RTE")) == []
    (problem,) = resource_problems(compose_config("model.base=org/other", "data.task=RTE"))
    assert problem.startswith("model.base='org/other'")


def test_local_problems_are_reported_together_with_the_sources_own_words(tiny_base, glue_dir, tmp_path):
    lines = resource_problems(compose_config(
        *tiny_run_overrides(tiny_base, glue_dir, tmp_path), "model.predecessor=/nowhere/model",
        f"data.glue_dir={tmp_path / 'missing'}", "method=transfer", "method.successor=/nowhere/successor",
    ))  # fmt: skip
    assert len(lines) == 3
    assert lines[0].startswith("model.predecessor='/nowhere/model' (model and tokenizer): no such folder")
    assert lines[1].startswith("method.successor='/nowhere/successor': no such folder")
    assert lines[2].startswith(f"data.glue_dir={tmp_path / 'missing'} is not a folder")


# Each makes a Hugging Face library skip the hub: huggingface_hub reads the first two, datasets the last or else them.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def test_an_unreachable_hub_is_asked_once_without_retries_from_any_shell(tmp_path, monkeypatch):
    """The whole command, imports included, as a user without network runs it (the hub at a closed port). Its process
    inherits this one's environment, and a developer's shell may set any of the offline variables: the test takes
    each out (any one left makes the command work offline, and the hub is never asked)."""
    for variable in OFFLINE_VARIABLES:  # conftest.py sets the first; a shell that works offline, any of them
        monkeypatch.delenv(variable, raising=False)
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "theseus_pl", "+experiment=rte_curriculum", f"hydra.run.dir={tmp_path / 'run'}",
         f"paths.cache_dir={tmp_path / 'cache'}"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    assert completed.returncode == 2  # refused
    assert completed.stderr.count("the hub is unreachable: ConnectError") == 2  # model and dataset
    assert "Retrying" not in completed.stderr and "During handling" not in completed.stderr
    assert elapsed < 25, f"{elapsed:.1f} s"
