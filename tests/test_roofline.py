"""Bounds, kinds, headroom, sensitivities, achieved: hand derivations."""

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import (
    Cost,
    CostModelError,
    Hardware,
    MemoryLevel,
    MissingRoofError,
    Roof,
    SymbolicComparisonError,
    achieved,
    as_float,
    bound,
    get_device,
    headroom,
    op_cost,
    sensitivities,
)
from costmodel.hardware import Link
from costmodel.symbols import K, M, N

TOY = Hardware(
    "toy",
    roofs=(
        Roof("tensor", "bf16", 100),
        Roof("tensor", "fp8", 200),
        Roof("vector", "fp32", 10),
        Roof("sfu", "fp32", 1),
    ),
    memory=(MemoryLevel("dram", 10, 1000), MemoryLevel("l2", 40)),
    links=(Link("scale_up", 5, sympy.Rational(1, 100)),),
)


def test_terms_lower_upper_kind():
    # 1000 bf16 FLOP -> 10 s, 1000 fp8 FLOP -> 5 s: one unit, times add: 15 s
    c = (
        Cost.compute("tensor", "bf16", 1000)
        + Cost.compute("tensor", "fp8", 1000)
        + Cost.traffic(read=50, write=50)
        + Cost.compute("sfu", "fp32", 3)
    )
    b = bound(c, TOY)
    assert b.terms == {"tensor": 15, "sfu": 3, "dram": 10}
    assert b.lower == 15 and b.upper == 28 and b.kind == "tensor" and b.category == "compute"


def test_overlap_and_launch_overhead_are_explicit():
    c = Cost.compute("tensor", "bf16", 1000) + Cost.traffic(read=50) + Cost.launches(4)
    hw = TOY.replace(overlap=sympy.Rational(1, 2), launch_overhead_s=sympy.Rational(1, 10))
    # 0.5*max(10, 5) + 0.5*(10 + 5) + 4*0.1 = 5 + 7.5 + 0.4
    assert bound(c, hw).time == sympy.Rational(129, 10)
    assert bound(c, TOY).time == 10


def test_comm_term_alpha_beta():
    c = op_cost("all_reduce", elements=100, p=4, dtype="fp32")
    b = bound(c, TOY)
    # 2*(3/4)*100*4 B / 5 B/s + 2*3 steps * 0.01 s = 120 + 0.06
    assert b.terms["link:scale_up"] == sympy.Rational(12006, 100)
    assert b.kind == "link:scale_up" and b.category == "communication"


def test_unbounded_units_and_missing_roofs():
    tpu = get_device("tpu-v5e")
    b = bound(op_cost("softmax", rows=8, cols=8), tpu)
    assert set(b.unbounded) == {"vector", "sfu"}  # unpublished rates are named, not dropped
    with pytest.raises(MissingRoofError, match="precisions available: bf16, int8"):
        bound(op_cost("gemm", M=8, N=8, K=8, dtype="fp8"), tpu)
    with pytest.raises(MissingRoofError, match="no link 'scale_out'"):
        bound(op_cost("all_gather", elements=8, p=2, link="scale_out"), TOY)


def test_symbolic_kind_stays_relational():
    b = bound(op_cost("gemm", M=M, N=N, K=K), Hardware.symbolic())
    with pytest.raises(SymbolicComparisonError, match="regions"):
        _ = b.kind
    regions = b.regions()
    assert set(regions) == {"tensor", "dram"}
    P, beta = sympy.symbols("P beta", positive=True)
    val = {M: 1, N: 4096, K: 4096, P: 312e12, beta: 1555e9}
    assert bool(regions["dram"].subs(val)) and not bool(regions["tensor"].subs(val))


def test_headroom_is_I_over_Istar_in_between():
    # GEMM 512x4096x4096 on a device whose ridge is 300: I = 409.6, I/I* = 1.365
    hw = Hardware("r300", roofs=(Roof("tensor", "bf16", 300),), memory=(MemoryLevel("dram", 1),))
    c = op_cost("gemm", M=512, N=4096, K=4096)
    assert headroom(c, hw, "compute") == c.intensity / 300
    assert headroom(c, hw, "dram") == 1


def test_sensitivities_by_differentiation():
    a100 = get_device("a100")
    c = op_cost("gemm", M=4096, N=4096, K=4096)  # compute-bound
    s = sensitivities(c, a100)
    assert s["tensor"]["elasticity"] == -1 and s["dram"]["elasticity"] == 0
    # dT/dP = -F/P^2
    assert s["tensor"]["dT_dresource"] == -c.flops / a100.require_peak("tensor", "bf16") ** 2
    mem = sensitivities(op_cost("gemm", M=1, N=4096, K=4096), a100)
    assert mem["dram"]["elasticity"] == -1 and mem["tensor"]["elasticity"] == 0


def test_achieved_flags_above_bound():
    c = op_cost("elementwise", n=32_000_000, inputs=2, dtype="fp32")
    hw = Hardware("probe", roofs=(Roof("tensor", "fp32", 1635.04e9),), memory=(MemoryLevel("dram", 71.78e9),))
    # article 4.2: predicted 5.35 ms, measured 5.07 ms -> 106%
    r = achieved(c, hw, 5.07e-3)
    assert round(r.bound_s * 1e3, 2) == 5.35
    assert r.fraction_of_bound == pytest.approx(1.055, abs=1e-3)
    assert not r.above_bound
    assert achieved(c, hw, 4.0e-3).above_bound


@settings(max_examples=60, deadline=None)
@given(f=st.integers(0, 10**15), d=st.integers(1, 10**12), v=st.integers(0, 10**12))
def test_bound_never_below_any_term(f, d, v):
    c = Cost.compute("tensor", "bf16", f) + Cost.compute("vector", "fp32", v) + Cost.traffic(read=d)
    b = bound(c, get_device("h100"))
    lower = as_float(b.lower)
    for t in b.terms.values():
        assert lower >= as_float(t)
    assert as_float(b.upper) >= lower
    # doubling a resource never slows anything down, and gains at most 2x
    for res in ("compute", "memory"):
        s = as_float(headroom(c, get_device("h100"), res, 2))
        assert 1 - 1e-12 <= s <= 2 + 1e-12


def test_fp32_matmul_falls_back_to_the_vector_roof():
    # H100 has no fp32 tensor roof: fp32 GEMM runs on the 66.9 TFLOP/s FP32 ALUs
    c = op_cost("gemm", M=4096, N=4096, K=4096, dtype="fp32")
    b = bound(c, get_device("h100"))
    assert "tensor" not in b.terms
    assert b.terms["vector"] == c.flops / get_device("h100").require_peak("vector", "fp32")


def test_symbolic_sensitivities_agree_with_numeric():
    c = op_cost("gemm", M=M, N=N, K=K)
    sym = sensitivities(c, Hardware.symbolic())
    P, beta = sympy.symbols("P beta", positive=True)
    a100 = get_device("a100")
    vals = {M: 1, N: 4096, K: 4096, P: a100.require_peak("tensor", "bf16"), beta: a100.bandwidth()}
    num = sensitivities(c.subs({M: 1, N: 4096, K: 4096}), a100)
    for label in ("tensor", "dram"):
        assert sympy.simplify(sym[label]["elasticity"].subs(vals) - num[label]["elasticity"]) == 0


def test_bound_and_its_siblings_take_a_device_name():
    """``bound(cost, "a100")`` as every other entry point takes a device (review finding 9)."""
    c = op_cost("gemm", M=512, N=4096, K=4096)
    b = bound(c, "a100")  # the alias of the A100 SXM 40GB: 312 TFLOP/s dense bf16 (datasheet)
    assert b.hardware.name == "a100-sxm-40gb"
    assert b.seconds("tensor") == pytest.approx(2 * 512 * 4096 * 4096 / 312e12)  # one MAC = 2 FLOP
    # a square bf16 GEMM of 4096 is compute-bound on an H100 (I = 4096/3 FLOP/B, twice 295 still below)
    assert headroom(op_cost("gemm", M=4096, N=4096, K=4096), "h100", "compute") == 2
    assert sensitivities(c, "a100")["tensor"]["elasticity"] == -1
    assert achieved(c, "a100", 1.0).achieved_flops_per_s == 2 * 512 * 4096 * 4096


@pytest.mark.parametrize(
    ("cost", "hw", "message"),
    [
        ("gemm", "a100", r"^cost must be a Cost \(op_cost\(\.\.\.\), a graph's total\), got str 'gemm'$"),
        (None, "a100", r"^cost must be a Cost .*, got NoneType None$"),
        (Cost.zero(), 3, r"^device must be a name or a Hardware, got int 3$"),
    ],
)
def test_a_wrong_cost_or_device_is_one_line_naming_it(cost, hw, message):
    for fn in (bound, sensitivities):
        with pytest.raises(CostModelError, match=message):
            fn(cost, hw)


def test_seconds_of_a_term_the_bound_lacks_names_the_allowed_ones():
    b = bound(op_cost("gemm", M=512, N=4096, K=4096), "a100")
    message = r"^what must be time, lower, upper, launch or a term of this bound \(tensor, dram\), got 'x'$"
    with pytest.raises(CostModelError, match=message):
        b.seconds("x")
