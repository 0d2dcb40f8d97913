"""``trainer.precision=auto`` decides by the machine: bf16 autocast where the CPU has AMX, fp32 elsewhere."""

from theseus_pl.lightning.precision import choose_precision, cpu_bf16_problem, parse_cpuinfo

AMX = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"})
AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})  # bf16 autocast was slower there


def test_auto_is_bf16_on_a_cpu_with_amx_and_fp32_on_any_other():
    assert choose_precision("auto", False, AMX) == "bf16-mixed"
    assert choose_precision("auto", False, AVX512_BF16) == "32-true"
    assert choose_precision("auto", False, frozenset()) == "32-true"


def test_auto_on_a_gpu_follows_its_bf16_support_and_a_given_precision_always_wins():
    assert choose_precision("auto", True, frozenset(), gpu_bf16=True) == "bf16-mixed"
    assert choose_precision("auto", True, AMX, gpu_bf16=False) == "32-true"
    assert choose_precision("32-true", False, AMX) == "32-true"
    assert choose_precision("bf16-mixed", False, frozenset()) == "bf16-mixed"


def test_the_cpu_is_read_from_cpuinfo():
    text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu avx2 amx_bf16 amx_tile\n\n"
    text += "processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n"
    cpu = parse_cpuinfo(text)
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8480+"
    assert cpu.relevant_flags == ["avx2", "amx_tile", "amx_bf16"]


def test_this_torch_build_can_train_under_cpu_bf16_autocast():
    assert cpu_bf16_problem() is None
