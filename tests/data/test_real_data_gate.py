"""Tests that need the real GLUE files skip on a user's clone without them, and fail in CI, which has them.

Each case runs pytest on one such test in this process (``pytester``), not in a pytest process of its own, which
imported torch and the test helpers again: about 8 s a case."""

import sys
from pathlib import Path

import pytest

# Imported here, before a run: pytester takes away what a run imported, and pyarrow's types (registered as `datasets`
# is imported) cannot be registered twice in one process.
import theseus_pl.data.datamodule  # noqa: F401

TESTS = Path(__file__).parent


def pytest_without_glue(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, require: bool):
    """pytest run on a real-data test where ``$THESEUS_PL_GLUE_DIR`` names no folder, with or without CI's variable.
    The helpers' ``conftest`` reads that folder as it is imported: the run imports it anew (pytester puts this
    process's modules back afterwards)."""
    monkeypatch.setenv("THESEUS_PL_GLUE_DIR", str(pytester.path / "no_glue"))
    if require:
        monkeypatch.setenv("THESEUS_PL_REQUIRE_GLUE", "1")
    else:
        monkeypatch.delenv("THESEUS_PL_REQUIRE_GLUE", raising=False)
    monkeypatch.delitem(sys.modules, "conftest", raising=False)
    return pytester.runpytest_inprocess("-q", "-n", "0", "-rs", "-p", "no:cacheprovider",
                                        TESTS / "test_data_real.py", "-k", "published_sizes and RTE")  # fmt: skip


@pytest.mark.slow
def test_without_glue_the_real_data_tests_skip_and_say_how_to_provide_it(pytester, monkeypatch):
    completed = pytest_without_glue(pytester, monkeypatch, require=False)
    output = completed.stdout.str()
    assert completed.ret == 0, output[-2000:]
    assert "1 skipped" in output
    assert "needs the real GLUE files" in output and "THESEUS_PL_GLUE_DIR=<dir>" in output
    assert str(pytester.path / "no_glue") in output  # the folder it looked in


@pytest.mark.slow
def test_with_the_ci_variable_a_missing_glue_folder_fails(pytester, monkeypatch):
    completed = pytest_without_glue(pytester, monkeypatch, require=True)
    output = completed.stdout.str()
    assert completed.ret == 1, output[-2000:]
    assert "1 error" in output and "THESEUS_PL_REQUIRE_GLUE=1" in output  # fixture fails
