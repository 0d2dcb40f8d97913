"""Cache entries are whole or rebuilt, and a missing one is built by one job while the others wait."""

import json
import logging
import multiprocessing
import time
from pathlib import Path

import pytest

from theseus_pl.data.cache_entry import MANIFEST, load_or_build

pytestmark = pytest.mark.quick


def build_slowly(folder: Path, log_file: Path, seconds: float) -> None:
    with log_file.open("a") as log:
        log.write("built\n")
    (folder / "value.txt").write_text("42")
    time.sleep(seconds)


def load_value(folder: Path) -> str:
    return (folder / "value.txt").read_text()


def one_job(entry: str, log_file: str, seconds: float, results: str) -> None:
    value, built = load_or_build(
        Path(entry), load_value, lambda staging: build_slowly(staging, Path(log_file), seconds), "test entry"
    )
    with Path(results).open("a") as out:
        out.write(json.dumps([value, built]) + "\n")


def test_an_entry_is_built_once_with_a_manifest_and_then_loaded(tmp_path):
    entry, log_file = tmp_path / "cache" / "entry", tmp_path / "builds.log"
    first = load_or_build(entry, load_value, lambda staging: build_slowly(staging, log_file, 0), "test entry")
    second = load_or_build(entry, load_value, lambda staging: build_slowly(staging, log_file, 0), "test entry")
    assert (first, second) == (("42", True), ("42", False))
    assert log_file.read_text() == "built\n"
    assert json.loads((entry / MANIFEST).read_text()) == {"value.txt": 2}
    assert sorted(path.name for path in entry.parent.iterdir()) == [".entry.lock", "entry"]  # no staging left


@pytest.mark.parametrize("damage", ["truncate", "remove_manifest", "unloadable"])
def test_a_damaged_entry_is_reported_by_path_and_rebuilt_once(tmp_path, caplog, damage):
    entry, log_file = tmp_path / "entry", tmp_path / "builds.log"
    load_or_build(entry, load_value, lambda staging: build_slowly(staging, log_file, 0), "test entry")
    if damage == "truncate":
        (entry / "value.txt").write_text("4")
    elif damage == "remove_manifest":
        (entry / MANIFEST).unlink()
    else:
        (entry / "value.txt").write_text("xx")  # the right size, but the loader refuses it

    def strict_load(folder: Path) -> str:
        value = load_value(folder)
        if not value.isdigit():
            raise ValueError("not a number")
        return value

    with caplog.at_level(logging.WARNING, logger="theseus_pl.data.cache_entry"):
        value, built = load_or_build(
            entry, strict_load, lambda staging: build_slowly(staging, log_file, 0), "test entry"
        )
    assert (value, built) == ("42", True)
    assert log_file.read_text() == "built\nbuilt\n"
    (warning,) = caplog.records
    assert f"The cached test entry at {entry} is damaged" in warning.getMessage()
    expected = {"truncate": "value.txt has 1 bytes, 2 when written", "remove_manifest": "no readable manifest.json",
                "unloadable": "it fails to load: ValueError: not a number"}[damage]  # fmt: skip
    assert expected in warning.getMessage()


def test_an_entry_that_fails_again_after_its_rebuild_raises(tmp_path):
    def never_loads(folder: Path) -> str:
        raise OSError("unreadable")

    with pytest.raises(OSError, match="unreadable"):
        load_or_build(tmp_path / "entry", never_loads, lambda staging: None, "test entry")


def test_two_jobs_needing_one_missing_entry_build_it_once(tmp_path):
    entry, log_file, results = tmp_path / "entry", tmp_path / "builds.log", tmp_path / "results.jsonl"
    spawn = multiprocessing.get_context("spawn")
    builder = spawn.Process(target=one_job, args=(str(entry), str(log_file), 3.0, str(results)))
    builder.start()
    deadline = time.monotonic() + 60
    while not log_file.exists():  # the first job holds the lock and is building
        assert time.monotonic() < deadline, "the first job never started building"
        time.sleep(0.05)
    waiter = spawn.Process(target=one_job, args=(str(entry), str(log_file), 3.0, str(results)))
    waiter.start()
    builder.join(60)
    waiter.join(60)
    assert (builder.exitcode, waiter.exitcode) == (0, 0)
    assert log_file.read_text() == "built\n"
    outcomes = sorted(json.loads(line)[1] for line in results.read_text().splitlines())
    assert outcomes == [False, True]  # one built it, the other waited and loaded it
