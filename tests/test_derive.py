"""Closed-form derivations."""

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import (
    Hardware,
    UnknownDTypeError,
    as_float,
    balance_point,
    crossover,
    decode_attention_intensity,
    gemm_crossover,
    get_device,
    latex,
    op_cost,
    tile_intensity,
)
from costmodel.derive import solved_condition
from costmodel.symbols import K, N

P, beta, b = sympy.symbols("P beta b", positive=True)


def test_balance_point_symbolic_and_numeric():
    assert balance_point() == P / beta
    assert as_float(balance_point(get_device("h100"), precision="fp8")) == 1978.9e12 / 3.35e12


def test_gemm_crossover_closed_forms():
    xo = gemm_crossover(N=N, K=K, dtype=b)
    # solve 2MNK = I* b (MK + KN + MN) for M
    assert sympy.simplify(xo.exact - (P / beta) * b * N * K / (2 * N * K - (P / beta) * b * (N + K))) == 0
    assert xo.asymptotic == P * b / (2 * beta)  # M* = balance * b / 2
    assert "\\frac" in latex(xo.exact)


def test_square_gemm_crossover_is_3b_balance_over_2():
    m = sympy.Symbol("m", integer=True, positive=True)
    xo = crossover(op_cost("gemm", M=m, N=m, K=m, dtype=b), m)
    # 2m^3 / (3 b m^2) = I*  ->  m* = 3 b I* / 2
    assert sympy.simplify(xo.exact - 3 * b * P / (2 * beta)) == 0


def test_int8_weights_halve_the_crossover():
    bf16 = gemm_crossover(N=N, K=K, dtype="bf16").asymptotic
    w8 = gemm_crossover(N=N, K=K, dtype="bf16", w_dtype="int8").asymptotic
    assert sympy.simplify(bf16 / w8) == 2


def test_decode_attention_closed_form():
    h, hkv = sympy.symbols("H H_kv", positive=True, integer=True)
    assert sympy.simplify(decode_attention_intensity(h, hkv, b) - 2 * h / (hkv * b)) == 0
    # fp8 KV doubles it
    assert decode_attention_intensity(32, 8, "fp8") == 8


def test_tile_intensity():
    tm, tn = sympy.symbols("t_m t_n", positive=True, integer=True)
    assert sympy.simplify(tile_intensity(tm, tn, b) - 2 * tm * tn / (b * (tm + tn))) == 0
    # 128 x 256 bf16 tile: 2*128*256 / (2*384) = 85.33
    assert tile_intensity(128, 256) == sympy.Rational(256, 3)


def test_crossover_never_reached_returns_none():
    # elementwise intensity is constant: no batch makes it compute-bound
    n = sympy.Symbol("n", positive=True, integer=True)
    xo = crossover(
        op_cost("elementwise", n=n, inputs=2), n, get_device("h100"), unit="vector", precision="fp32"
    )
    assert xo.exact is None and xo.integer is None


def test_symbolic_device_crossover_matches_numeric_after_substitution():
    xo_sym = gemm_crossover(N=4096, K=4096, hw=Hardware.symbolic())
    xo_num = gemm_crossover(N=4096, K=4096, hw=get_device("a100"))
    a = get_device("a100")
    val = xo_sym.exact.subs({P: a.require_peak("tensor", "bf16"), beta: a.bandwidth()})
    assert sympy.simplify(val - xo_num.exact) == 0


def test_narrow_gemms_write_bf16_by_default():
    """NVFP4/FP8 GEMMs write a 16-bit output: the default follows the kernels, and it moves M*.

    By hand on B200 (fp4 dense 9e15 FLOP/s, 7.7e12 B/s: I* = 1168.83), N = K = 8192, NVFP4
    operands at 4.5 bits (0.5625 B) and a bf16 output (2 B):
    2 M 8192 / (0.5625 M + 0.5625 * 8192 + 2 M) = I*  ->  M* = 4608 I* / (16384 - 2.5625 I*) = 402.3
    """
    from costmodel import get_device

    b200 = get_device("b200")
    i_star = 9e15 / 7.7e12
    m_star = 4608 * i_star / (16384 - 2.5625 * i_star)
    xo = gemm_crossover(N=8192, K=8192, hw=b200, dtype="nvfp4")
    assert float(xo.exact) == pytest.approx(m_star, rel=1e-9) and xo.integer == 403
    narrow = gemm_crossover(N=8192, K=8192, hw=b200, dtype="nvfp4", out_dtype="nvfp4")
    assert narrow.integer < xo.integer  # a kernel writing NVFP4 moves fewer bytes


def test_a_symbolic_shape_holds_only_where_N_and_K_are_positive():
    """N = 1000 - x: M* = 4096 I* N / (4096 N - I* (N + 4096)) > 0 where 4096 N > I* (N + 4096),
    N > 4096 I* / (4096 - I*) = 318.29, i.e. x < 1000 - 318.29 = 681.71 (with N > 0: x < 1000,
    implied). N = 100 - x is below 100 for every valid x, under 318.29: no crossover (a review
    found "where x > 100", where N < 0). N = x - 100: x > 418.29."""
    from costmodel.symbols import quantity

    x, ridge = quantity("x"), sympy.Rational(19788, 67)
    edge = 4096 * ridge / (4096 - ridge)
    h100 = get_device("h100")
    assert gemm_crossover(N=1000 - x, K=4096, hw=h100).condition == (x < 1000 - edge)
    assert gemm_crossover(N=x - 100, K=4096, hw=h100).condition == (x > 100 + edge)
    never = gemm_crossover(N=100 - x, K=4096, hw=h100)
    assert never.exact is None and never.condition is None
    assert gemm_crossover(N=x, K=100 - x, hw=h100).exact is None  # K < 100: never


def test_solved_condition_reads_a_condition_over_the_symbols_domain():
    from costmodel.symbols import quantity

    x = quantity("x")  # positive
    assert solved_condition(sympy.And(sympy.Or(x > 1000, x < 700), 1000 - x > 0)) == (x < 700)
    assert solved_condition(128 * x / (x + 128) >= 295) is sympy.false
    assert solved_condition(x + 1 > 0) is sympy.true
    # what it cannot solve is kept as given, never an error
    assert solved_condition(sympy.Xor(x > 3, x < 5)) == sympy.Xor(x > 3, x < 5)


def test_gemm_crossover_of_a_symbolic_shape_on_a_device():
    """[M,4096] x [4096,x] in bf16 on an H100 (I* = 989.4e12 / 3.35e12 = 19788/67):
    2 M x 4096 / (2 (4096 M + 4096 x + M x)) = I*  ->  M* = 4096 I* x / (4096 x - I* (x + 4096)),
    a crossover only where that is positive: x > 4096 I* / (4096 - I*) = 318.29. The asymptote is
    N, K -> oo as for a numeric shape (I* b / 2 = I* for b = 2), not x -> oo alone (318.29)."""
    from costmodel.symbols import quantity

    x, ridge = quantity("x"), sympy.Rational(19788, 67)
    xo = gemm_crossover(N=x, K=4096, hw=get_device("h100"))
    assert sympy.simplify(xo.exact - 4096 * ridge * x / (4096 * x - ridge * (x + 4096))) == 0
    assert xo.condition == (x > 4096 * ridge / (4096 - ridge))
    assert xo.asymptotic == ridge and xo.integer is None
    # a numeric shape has no condition: its M* is a number (or None)
    assert gemm_crossover(N=4096, K=4096, hw=get_device("h100")).condition is None
    # fully symbolic (device too): M* = I* b N K / (2 N K - I* b (N + K)) > 0 where the denominator is
    assert gemm_crossover(N=N, K=K, dtype=b).condition == (2 * K * N * beta - K * P * b - N * P * b > 0)


@settings(max_examples=40, deadline=None)
@given(
    a=st.integers(min_value=-8, max_value=8).filter(bool),
    c=st.integers(min_value=-3000, max_value=3000),
    x=st.integers(min_value=1, max_value=5000),
)
def test_a_symbolic_shapes_condition_is_where_the_numeric_shape_has_a_crossover(a, c, x):
    """N = a x + c, K = 4096 on an H100: the symbolic condition holds at x exactly where the
    numeric shape N = a x + c is a width (N > 0) with a compute-bound M (the numeric path's M*),
    two derivations of one fact; a shape on the ridge's edge is left out (equality)."""
    from costmodel.errors import InvalidDimensionError
    from costmodel.symbols import quantity

    sym = quantity("x")
    h100 = get_device("h100")
    if a < 0 and c <= 0:  # never a width for x > 0: refused as such
        with pytest.raises(InvalidDimensionError, match="N must be a positive"):
            gemm_crossover(N=a * sym + c, K=4096, hw=h100)
        return
    xo = gemm_crossover(N=a * sym + c, K=4096, hw=h100)
    n = a * x + c
    numeric = n > 0 and gemm_crossover(N=n, K=4096, hw=h100).exact is not None
    edge = 4096 * sympy.Rational(19788, 67) / (4096 - sympy.Rational(19788, 67))
    if n == edge:
        return
    if xo.condition is None:
        assert not numeric if xo.exact is None else numeric
    else:
        assert bool(xo.condition.subs(sym, x)) == numeric, (a, c, x, xo.condition)


@pytest.mark.parametrize("two", [2, sympy.Integer(2), 2.0])
def test_a_number_of_bytes_is_refused_as_a_dtype_however_it_is_typed(two):
    # one rule (review finding 11): 2 was refused while sympy.Integer(2) was taken as 2 bytes,
    # though 2 bytes names no roof (bf16 and fp16 both); a name or a symbol of bytes is allowed
    message = r"^dtype must be a dtype name such as 'bf16', a DType, or a symbolic bytes per element"
    with pytest.raises(UnknownDTypeError, match=message + r".*, got (int|Integer|float) 2(\.0)? "):
        gemm_crossover(N=4096, K=4096, dtype=two)
    with pytest.raises(UnknownDTypeError, match=message):
        decode_attention_intensity(32, 8, two)
    with pytest.raises(UnknownDTypeError, match=r"^w_dtype must be a dtype name"):
        gemm_crossover(N=4096, K=4096, w_dtype=two)
