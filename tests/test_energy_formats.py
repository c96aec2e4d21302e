"""Energy model (Horowitz 45 nm) and block-scaled 4-bit formats."""

import numpy as np
import pytest
import sympy

from costmodel import gemm_crossover, get_device, op_cost
from costmodel.energy import HOROWITZ_45NM, energy, energy_ridge, reuse_factor
from costmodel.errors import CostModelError
from costmodel.formats import E2M1_VALUES, compare_formats, quantize, round_e4m3
from costmodel.symbols import dim
from graphs import decode_energy_vs_batch

PJ = sympy.Rational(1, 10**12)


def test_table_values_from_horowitz():
    # 16-bit FP multiply 1.1 pJ + add 0.4 pJ per MAC = 2 FLOPs -> 0.75 pJ per FLOP
    assert HOROWITZ_45NM.flop_j("bf16") == sympy.Rational(3, 4) * PJ
    assert HOROWITZ_45NM.flop_j("fp32") == sympy.Rational(23, 10) * PJ  # (3.7 + 0.9) / 2
    assert HOROWITZ_45NM.byte_j("dram") == sympy.Rational(1300, 8) * PJ  # 1.3 nJ per 64-bit access
    with pytest.raises(CostModelError, match="no FLOP energy for precision 'fp8_e4m3'"):
        HOROWITZ_45NM.flop_j("fp8_e4m3")


def test_energy_of_a_cost_and_the_ridge():
    c = op_cost("gemm", M=1, N=4096, K=4096)
    e = energy(c, HOROWITZ_45NM)
    assert e["compute:tensor"] == 2 * 4096 * 4096 * sympy.Rational(3, 4) * PJ
    assert e["memory:dram"] == c.bytes * sympy.Rational(1300, 8) * PJ
    assert energy_ridge("bf16", "dram") == sympy.Rational(1300, 8) / sympy.Rational(3, 4)  # 216.7 FLOP/B
    assert reuse_factor(sympy.Rational(1, 2)) == energy_ridge()
    assert reuse_factor(sympy.Rational(9, 10)) == 9 * energy_ridge()
    five = HOROWITZ_45NM.scaled(scale=sympy.Rational(1, 10), dram_scale=sympy.Rational(1, 4))
    assert energy_ridge(table=five) == energy_ridge() * sympy.Rational(10, 4)


def test_decode_energy_weight_reads_dominate_at_batch_one():
    e = decode_energy_vs_batch("llama-3.1-8b", ctx=1024)
    assert e.ratio_at_batch_1 > 100  # two orders of magnitude
    b = e.crossover_batch
    x = dim("B")
    assert float(e.arithmetic_j.subs(x, b)) == pytest.approx(float(e.weight_reads_j.subs(x, b)), rel=1e-6)
    # about the energy ridge over 1 (2 FLOPs per 2-byte weight): e_D / e_F = 216.7, less the other terms
    assert 150 < b < float(energy_ridge())


def test_formats_on_heavy_tailed_data():
    x = np.random.default_rng(0).standard_t(3, size=(256, 1024))
    r = {row.format: row for row in compare_formats(x)}
    for key in ("relative_error", "zero_fraction"):
        assert getattr(r["nvfp4"], key) < getattr(r["mxfp4"], key) < getattr(r["fp4_tensor"], key)
    assert r["nvfp4"].bits_per_element == 4.5 and r["mxfp4"].bits_per_element == 4.25


def test_quantiser_properties():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4096)
    for fmt in ("fp4_tensor", "mxfp4", "nvfp4"):
        q = quantize(x, fmt)
        np.testing.assert_allclose(quantize(q, fmt), q, rtol=1e-12, atol=1e-12)  # idempotent
    # a block of exact E2M1 values times a power of two survives MXFP4 untouched
    exact = np.tile(np.concatenate([E2M1_VALUES, -E2M1_VALUES]), 2) * 2.0**-3
    np.testing.assert_array_equal(quantize(exact, "mxfp4"), exact)
    np.testing.assert_array_equal(
        round_e4m3(np.array([448.0, 1000.0, 1.0625, 3.3])), [448.0, 448.0, 1.0, 3.25]
    )
    with pytest.raises(CostModelError, match="format 'int3' not allowed"):
        quantize(x, "int3")


def test_format_moves_the_ridge_and_the_critical_batch():
    h100, b200 = get_device("h100"), get_device("b200")
    base = gemm_crossover(N=14336, K=4096, hw=h100).integer
    # every operand in fp8, output too: 2x the roof over 2x fewer bytes leaves M* where it was
    assert gemm_crossover(N=14336, K=4096, hw=h100, dtype="fp8", out_dtype="fp8").integer == base
    # what kernels do, a bf16 output: more bytes per FLOP, so a larger M*
    assert gemm_crossover(N=14336, K=4096, hw=h100, dtype="fp8").integer > base
    assert gemm_crossover(N=14336, K=4096, hw=h100, w_dtype="int8").integer == pytest.approx(base / 2, abs=1)
    bf = gemm_crossover(N=14336, K=4096, hw=b200).integer
    fp4 = gemm_crossover(N=14336, K=4096, hw=b200, dtype="nvfp4").integer
    assert fp4 > bf  # 4x the roof but only 3.56x fewer bytes (NVFP4 is 4.5 bits)


def test_public_entry_points_parse_strings_safely():
    """User values given to ``scaled``, ``split_matmul_network`` and
    ``experts_touched`` are validated, never handed to ``sympify``: safe
    arithmetic strings work, code is refused with the field's name."""
    from costmodel.derive import split_matmul_network
    from costmodel.rules.moe import experts_touched

    assert HOROWITZ_45NM.scaled("1/2").scale == sympy.Rational(1, 2) * HOROWITZ_45NM.scale
    with pytest.raises(CostModelError, match="scale"):
        HOROWITZ_45NM.scaled("__import__('os')")
    with pytest.raises(CostModelError, match="K"):
        split_matmul_network(K="__import__('os').getcwd()")
    # uniform routing, T=1 token: exactly top_k experts are touched
    assert experts_touched(1, 8, 2) == 2
    with pytest.raises(CostModelError, match="tokens"):
        experts_touched("__import__('os')", 8, 2)
