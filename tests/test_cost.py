"""The Cost algebra: identities, substitution, errors, and property tests."""

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import Cost, InvalidDimensionError, UnboundSymbolError, op_cost
from costmodel.errors import CostModelError
from costmodel.symbols import K, M, N

dims = st.integers(min_value=1, max_value=10**6)


def test_add_scale_and_queries():
    a = Cost.compute("tensor", "bf16", 10) + Cost.traffic(read=4, write=2)
    b = Cost.compute("vector", "fp32", 3) + Cost.traffic(read=1, level="l2") + Cost.launches(1)
    s = a + b
    assert s.flops == 13 and s.bytes == 6 and s.bytes_at("l2") == 1
    assert s.flops_on("tensor") == 10 and s.flops_on("vector", "fp32") == 3
    assert s.levels == ("dram", "l2")
    assert (3 * s).flops == 39 and (s * 3) == (3 * s)
    assert sum([a, b]) == s  # sum() starts from 0
    assert s.intensity == sympy.Rational(13, 6)


def test_symbolic_scale_and_subs_by_name():
    L = sympy.Symbol("num_hidden_layers", integer=True, positive=True)
    c = op_cost("gemm", M=M, N=N, K=K) * L
    assert c.subs({"M": 1, "N": 2, "K": 3, "L": 4}).flops == 2 * 1 * 2 * 3 * 4


def test_evaluate_names_unbound_symbols():
    c = op_cost("gemm", M=M, N=N, K=K)
    with pytest.raises(UnboundSymbolError, match="K, N"):
        c.evaluate({M: 4})


def test_negative_terms_and_bad_units_are_rejected():
    with pytest.raises(InvalidDimensionError, match="non-negative"):
        Cost.traffic(read=-1)
    with pytest.raises(CostModelError, match="unit 'gpu'"):
        Cost.compute("gpu", "bf16", 1)
    with pytest.raises(InvalidDimensionError, match="repeat count"):
        Cost.launches(1) * -2


def test_intensity_without_bytes_is_an_error():
    with pytest.raises(CostModelError, match="moves no bytes"):
        _ = Cost.compute("tensor", "bf16", 1).intensity


def test_to_dict_numeric_and_symbolic():
    c = op_cost("gemm", M=M, N=8, K=8)
    assert c.to_dict()["flops"] == {"tensor:bf16": "128*M"}
    assert c.subs({M: 2}).to_dict(numeric=True)["flops"] == {"tensor:bf16": 256.0}


@settings(max_examples=60, deadline=None)
@given(m=dims, n=dims, k=dims)
def test_symbolic_then_substitute_equals_numeric_rule(m, n, k):
    sym = op_cost("gemm", M=M, N=N, K=K, w_dtype="int4").subs({M: m, N: n, K: k})
    num = op_cost("gemm", M=m, N=n, K=k, w_dtype="int4")
    assert sym == num


@settings(max_examples=40, deadline=None)
@given(
    heads=st.sampled_from([1, 2, 4, 8]),
    group=st.sampled_from([1, 2, 4]),
    q=st.integers(1, 64),
    extra=st.integers(0, 64),
    d=st.sampled_from([32, 64, 128]),
    causal=st.booleans(),
    variant=st.sampled_from(["naive", "flash"]),
)
def test_attention_symbolic_equals_numeric(heads, group, q, extra, d, causal, variant):
    h, hk, n, nkv, dd = sympy.symbols("h hk n nkv dd", integer=True, positive=True)
    sym = op_cost(
        "attention", heads=h, kv_heads=hk, q_len=n, kv_len=nkv, head_dim=dd, causal=causal, variant=variant
    )
    vals = {h: heads * group, hk: heads, n: q, nkv: q + extra, dd: d}
    num = op_cost(
        "attention",
        heads=heads * group,
        kv_heads=heads,
        q_len=q,
        kv_len=q + extra,
        head_dim=d,
        causal=causal,
        variant=variant,
    )
    assert sym.subs(vals) == num


@settings(max_examples=60, deadline=None)
@given(a=st.integers(0, 10**9), b=st.integers(0, 10**9), r=st.integers(0, 10**9), k=st.integers(0, 50))
def test_addition_is_termwise_and_scaling_distributes(a, b, r, k):
    x = Cost.compute("tensor", "bf16", a) + Cost.traffic(read=r)
    y = Cost.compute("tensor", "bf16", b) + Cost.traffic(write=r)
    assert (x + y).flops == a + b
    assert (x + y).bytes == 2 * r
    assert k * (x + y) == k * x + k * y


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["bf16", "fp8", "fp32"])),
        max_size=12,
    )
)
def test_sum_of_many_equals_the_fold_of_addition(parts):
    costs = [Cost.compute("tensor", p, f) + Cost.traffic(read=r) for f, r, p in parts]
    folded = Cost.zero()
    for c in costs:
        folded = folded + c
    total = Cost.sum(costs)
    assert total == folded
    assert total.flops == sum(f for f, _, _ in parts) and total.bytes == sum(r for _, r, _ in parts)
