"""Tests that need the real GLUE files skip on a user's clone without them, and fail in CI, which has them."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def pytest_without_glue(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    inherited = {key: value for key, value in os.environ.items() if key != "THESEUS_PL_REQUIRE_GLUE"}
    variables = {**inherited, "THESEUS_PL_GLUE_DIR": str(tmp_path / "no_glue"), **env}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-rs", "-p", "no:cacheprovider",
         str(TESTS / "test_data_real.py"), "-k", "published_sizes and RTE"],
        env=variables, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_without_glue_the_real_data_tests_skip_and_say_how_to_provide_it(tmp_path):
    completed = pytest_without_glue(tmp_path)
    assert completed.returncode == 0, completed.stdout[-2000:]
    assert "1 skipped" in completed.stdout
    assert "needs the real GLUE files" in completed.stdout and "THESEUS_PL_GLUE_DIR=<dir>" in completed.stdout


@pytest.mark.slow
def test_with_the_ci_variable_a_missing_glue_folder_fails(tmp_path):
    completed = pytest_without_glue(tmp_path, THESEUS_PL_REQUIRE_GLUE="1")
    assert completed.returncode == 1
    assert "1 error" in completed.stdout and "THESEUS_PL_REQUIRE_GLUE=1" in completed.stdout  # fixture fails
