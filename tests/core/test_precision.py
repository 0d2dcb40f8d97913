"""``trainer.precision=auto`` decides by the machine: bf16 autocast where the CPU has AMX or where bf16 measured
faster on a CPU with AVX-512 BF16, fp32 elsewhere; every choice says why."""

import pytest
import torch

from theseus_pl.core import precision
from theseus_pl.core.precision import (
    BF16_AT_MOST,
    Bf16Measurement,
    choose_precision,
    cpu_bf16_problem,
    measure_bf16,
    parse_cpuinfo,
)
from theseus_pl.core.timing import BUSY_CORES, Timings

pytestmark = pytest.mark.quick

AMX = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"})
AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})  # bf16 faster on some, slower on others


def measured(ratio, other_cores=0.0):
    return lambda: Bf16Measurement(ratio, other_cores)


def never_measured():
    raise AssertionError("the rule measured where the flags decide")


def test_auto_is_bf16_on_a_cpu_with_amx_without_measuring():
    choice = choose_precision("auto", False, AMX, bf16_measurement=never_measured)
    assert choice.precision == "bf16-mixed"
    assert "AMX" in choice.reason


def test_auto_is_fp32_on_a_cpu_without_bf16_instructions_without_measuring():
    choice = choose_precision("auto", False, frozenset({"avx2", "avx512_vnni"}), bf16_measurement=never_measured)
    assert choice.precision == "32-true"
    assert "neither AMX nor AVX-512 BF16" in choice.reason


@pytest.mark.parametrize(("ratio", "precision"), [(0.46, "bf16-mixed"), (BF16_AT_MOST, "bf16-mixed"),
                                                  (0.81, "32-true"), (1.4, "32-true")])  # fmt: skip
def test_auto_on_avx512_bf16_without_amx_follows_the_measurement(ratio, precision):
    choice = choose_precision("auto", False, AVX512_BF16, bf16_measurement=measured(ratio))
    assert choice.precision == precision
    assert f"{ratio:.2f}x" in choice.reason


def test_auto_on_a_gpu_follows_its_bf16_support_and_a_given_precision_always_wins():
    assert choose_precision("auto", True, frozenset(), gpu_bf16=True).precision == "bf16-mixed"
    assert choose_precision("auto", True, AMX, gpu_bf16=False, bf16_measurement=never_measured).precision == "32-true"
    given = choose_precision("32-true", False, AVX512_BF16, bf16_measurement=never_measured)
    assert given.precision == "32-true"
    assert given.reason == "set by trainer.precision"
    assert choose_precision("bf16-mixed", False, frozenset()).precision == "bf16-mixed"


def test_the_measurement_is_a_positive_ratio_and_leaves_the_seeded_random_state_alone(monkeypatch, request):
    # A small block: where the CPU has no bf16 instructions (a run never measures there) autocast is emulated, and
    # the whole block took 16 s, not 1 s, with the AVX2 kernels. Its measurement is not left for later tests.
    monkeypatch.setattr(precision, "MEASURED_TOKENS", 128)
    request.addfinalizer(measure_bf16.cache_clear)
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    measure_bf16.cache_clear()
    measurement = measure_bf16()
    assert torch.equal(torch.rand(4), expected)
    assert 0 < measurement.ratio < 100
    assert measure_bf16() == measurement  # once per process


def test_a_busy_machine_is_measured_again_a_second_apart_until_idle_and_the_least_busy_measurement_is_kept(monkeypatch):
    # The tests' machine load is unread (conftest's machine_load_unread): each measurement's is planted here.
    other_cores = [BUSY_CORES + 2, BUSY_CORES + 1, BUSY_CORES + 3, 0.0, BUSY_CORES + 4]
    asked, slept = [], []

    def timed(calls, repeats, retries=1):
        asked.append(retries)
        busy = other_cores[len(asked) - 1]
        return Timings({"fp32": [1.0] * repeats, "bf16": [0.5 + busy] * repeats}, other_cores=busy)

    monkeypatch.setattr(precision, "interleaved_seconds", timed)
    monkeypatch.setattr(precision.time, "sleep", slept.append)
    measure_bf16.cache_clear()
    assert measure_bf16() == Bf16Measurement(0.5, 0.0)  # the idle fourth, and no fifth
    assert asked == [1, 0, 0, 0] and slept == [1.0] * 3
    measure_bf16.cache_clear()
    other_cores[:], asked[:] = [BUSY_CORES + 2] * (1 + precision.BUSY_RETRIES), []  # busy throughout: it gives up
    assert measure_bf16().other_cores == BUSY_CORES + 2 and len(asked) == 1 + precision.BUSY_RETRIES
    measure_bf16.cache_clear()


def test_a_measurement_taken_on_a_busy_machine_says_so_in_the_reason():
    busy = choose_precision("auto", False, AVX512_BF16, bf16_measurement=measured(0.5, other_cores=BUSY_CORES + 1))
    assert busy.precision == "bf16-mixed"
    assert f"while other processes kept {BUSY_CORES + 1:.1f} cores busy" in busy.reason
    assert "busy" not in choose_precision("auto", False, AVX512_BF16, bf16_measurement=measured(0.5)).reason


def test_the_cpu_is_read_from_cpuinfo():
    text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu avx2 amx_bf16 amx_tile\n\n"
    text += "processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n"
    cpu = parse_cpuinfo(text)
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8480+"
    assert cpu.relevant_flags == ["avx2", "amx_tile", "amx_bf16"]


def test_this_torch_build_can_train_under_cpu_bf16_autocast():
    assert cpu_bf16_problem() is None
