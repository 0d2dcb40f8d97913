"""One timing method for every figure: interleaved rounds; the speed-up is the median of the per-round ratios."""

import itertools

import pytest
import torch

from theseus_pl.core import timing

pytestmark = pytest.mark.quick

MACHINE_CPU = timing._others_cpu_seconds  # the real reading (conftest's fixture replaces it in every test)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Costly(torch.nn.Module):
    """A model whose forward pass takes the next of ``costs`` seconds on ``clock``."""

    def __init__(self, clock, costs):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.clock, self.costs = clock, itertools.cycle(costs)

    def forward(self, input_ids):
        self.clock.now += next(self.costs)
        return input_ids


def test_the_speedup_is_the_median_ratio_of_interleaved_rounds_after_a_warm_up(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    predecessor = Costly(clock, [100.0, 3.0, 3.0, 3.0, 3.0])  # the warm-up round is slow, and not counted
    successor = Costly(clock, [50.0, 1.0, 1.5, 3.0, 1.0])
    batch = {"input_ids": torch.ones(1, 2), "labels": torch.zeros(1)}  # labels are not passed to the model
    speedup, _ = timing.inference_speedup(predecessor, successor, batch, repeats=4)
    assert speedup == pytest.approx(2.5)  # of 3, 2, 1, 3


def test_rounds_take_turns_and_a_round_count_below_one_is_refused():
    calls = []
    times = timing.interleaved_seconds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 2, warmup=1)
    assert calls == ["a", "b"] * 3 and [len(t) for t in times.values()] == [2, 2]
    with pytest.raises(ValueError, match="repeats=0 must be at least 1"):
        timing.interleaved_seconds({"a": lambda: None}, repeats=0)


def test_generation_speed_reports_both_stages_of_both_decoders():
    from decoder_models import tiny_decoder, tiny_token_ids

    from theseus_pl.core.layer_removal import keep_layers
    from theseus_pl.core.timing import generation_speed

    predecessor = tiny_decoder("llama", num_hidden_layers=12)
    successor = keep_layers(predecessor, [0, 1, 2])
    ids = tiny_token_ids(batch_size=4, length=32)
    speed = generation_speed(predecessor, successor, {"input_ids": ids}, ids[:1, :8], new_tokens=16, repeats=3)
    assert set(speed) == {
        f"{who}_{stage}_tokens_per_second" for who in ("predecessor", "successor") for stage in ("prefill", "decode")
    } | {"prefill_speedup", "decode_speedup"}  # and other_cores, where the machine's load can be read
    assert all(value > 0 for value in speed.values())  # how much faster is a benchmark's question, not a test's


def test_a_timing_beside_a_busy_machine_is_flagged_after_a_second_try(monkeypatch):
    import subprocess
    import sys
    import time

    monkeypatch.setattr(timing, "_others_cpu_seconds", MACHINE_CPU)
    if MACHINE_CPU() is None:
        pytest.skip("the machine's CPU time is read from /proc/stat (Linux)")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]  # a planted busy job
    try:
        time.sleep(0.5)
        calls = []
        timings = timing.interleaved_seconds({"a": lambda: (calls.append(1), time.sleep(0.1))}, repeats=3, warmup=0)
    finally:
        for spinner in spinners:
            spinner.kill()
    assert timings.busy and timings.other_cores > 1.0  # two cores spinning beside it
    assert len(calls) == 6  # measured twice, the machine busy both times


def test_a_busy_first_try_is_replaced_by_a_quiet_second(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    readings = iter([0.0, 3.0, 3.0, 3.0])  # others' CPU seconds: 3 during the first try, none during the second
    monkeypatch.setattr(timing, "_others_cpu_seconds", lambda: next(readings))
    costs = iter([1.0, 1.0, 2.0, 2.0])

    def call():
        clock.now += next(costs)

    timings = timing.interleaved_seconds({"a": call}, repeats=2, warmup=0)
    assert timings == {"a": [2.0, 2.0]} and timings.other_cores == 0.0 and not timings.busy
    monkeypatch.setattr(timing, "_others_cpu_seconds", lambda: None)
    unread = timing.interleaved_seconds({"a": lambda: None}, repeats=1)
    assert unread.other_cores is None and not unread.busy  # not Linux: nothing said either way
