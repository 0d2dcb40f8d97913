"""The core is a library of torch and transformers alone: its tests pass with neither Lightning nor Hydra loaded."""

import subprocess
import sys
from pathlib import Path

import pytest

CORE_TESTS = Path(__file__).parent
FORBIDDEN = ("lightning", "pytorch_lightning", "hydra", "omegaconf", "torchmetrics")

# pytest in a fresh process on this folder alone but this file (which would start it again, and again), in that
# process (-n 0: no workers), Hydra's pytest plugin switched off (it imports Hydra); then a look at what the process
# has imported.
RUN_CORE_TESTS = f"""
import sys, pytest
code = pytest.main(["-q", "-n", "0", "-p", "no:hydra_pytest", "-p", "no:cacheprovider", "-x", {str(CORE_TESTS)!r},
                    "--ignore", {str(CORE_TESTS / "test_core_alone.py")!r}])
loaded = sorted(name for name in {FORBIDDEN!r} if name in sys.modules)
print("LOADED", loaded)
sys.exit(int(code) or bool(loaded))
"""


@pytest.mark.slow
def test_core_tests_pass_without_lightning_or_hydra_imported():
    result = subprocess.run([sys.executable, "-c", RUN_CORE_TESTS], capture_output=True, text=True)
    assert "LOADED []" in result.stdout, result.stdout[-3000:]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
