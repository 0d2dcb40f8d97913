"""A run's peak memory: reset at the start of each run, so the jobs of a multirun (one process) each get their own."""

import sys

import numpy as np
import pytest

from theseus_pl.core import memory
from theseus_pl.core.memory import peak_memory, start_peak_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the resident-set peak is reset through /proc")
def test_the_peak_is_the_runs_not_the_processs():
    since = start_peak_memory()
    base = peak_memory(since).cpu_mb
    block = np.ones(300 * 2**20 // 8)  # 300 MiB, touched
    assert peak_memory(since).cpu_mb > base + 250
    del block
    since = start_peak_memory()  # the next job of a multirun
    assert since == "run" and peak_memory(since).cpu_mb < base + 100


def test_where_the_peak_cannot_be_reset_the_record_says_it_is_the_processs(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "CLEAR_REFS", tmp_path / "no" / "clear_refs")
    since = start_peak_memory()
    assert since == "process" and peak_memory(since).cpu_since == "process" and peak_memory(since).cpu_mb > 0
