"""One timing method for every figure: interleaved rounds; the speed-up is the median of the per-round ratios."""

import itertools

import pytest
import torch

from theseus_pl.core import timing


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
    assert timing.inference_speedup(predecessor, successor, batch, repeats=4) == pytest.approx(2.5)  # of 3, 2, 1, 3


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
    } | {"prefill_speedup", "decode_speedup"}
    assert all(value > 0 for value in speed.values())  # how much faster is a benchmark's question, not a test's
