"""Invariants, checked on random points (hypothesis): a counterexample is a bug."""

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import MissingRoofError, as_float, bound, device_names, get_device, op_cost
from costmodel.ledger import max_batch
from costmodel.symbols import B, ctx
from graphs import build_model, closed_forms, decode_report, model_ledger, summarize
from graphs.serving import as_workload
from models import get_model

QUICK = settings(max_examples=25, deadline=None)
TINY = as_workload("tiny")  # shared: each graph built once across examples
SMALL = as_workload("llama-3.1-8b")


@QUICK
@given(b=st.integers(1, 512), c=st.integers(1, 65536), db=st.integers(1, 64), dc=st.integers(1, 4096))
def test_decode_step_time_never_falls_as_batch_or_context_grows(b, c, db, dc):
    base = decode_report(TINY, "h100", batch=b, ctx=c).step_s
    assert decode_report(TINY, "h100", batch=b + db, ctx=c).step_s >= base * (1 - 1e-12)
    assert decode_report(TINY, "h100", batch=b, ctx=c + dc).step_s >= base * (1 - 1e-12)


OPS = st.one_of(
    st.builds(
        lambda m, n, k, dt: ("gemm", {"M": m, "N": n, "K": k, "dtype": dt}),
        st.integers(1, 8192),
        st.integers(1, 16384),
        st.integers(1, 16384),
        st.sampled_from(["bf16", "fp8", "fp32", "int8"]),
    ),
    st.builds(
        lambda b, h, q, kv, causal: (
            "attention",
            {
                "batch": b,
                "heads": h * 4,
                "kv_heads": h,
                "q_len": q,
                "kv_len": kv + q,
                "head_dim": 128,
                "causal": causal,
            },
        ),
        st.integers(1, 32),
        st.integers(1, 16),
        st.integers(1, 4096),
        st.integers(0, 65536),
        st.booleans(),
    ),
    st.builds(
        lambda n, r: ("elementwise", {"n": n, "inputs": r, "dtype": "bf16"}),
        st.integers(1, 10**9),
        st.integers(1, 3),
    ),
    st.builds(lambda r, c: ("softmax", {"rows": r, "cols": c}), st.integers(1, 10**5), st.integers(1, 10**5)),
)


@QUICK
@given(op=OPS, device=st.sampled_from(sorted(device_names())))
def test_lower_bound_never_exceeds_upper_bound(op, device):
    rule, params = op
    hw = get_device(device)
    try:
        b = bound(op_cost(rule, **params), hw)
    except MissingRoofError:  # a device without a roof for this precision says so by name
        return
    assert as_float(b.lower) <= as_float(b.upper) * (1 + 1e-12)
    assert all(as_float(t) <= as_float(b.lower) * (1 + 1e-12) for t in b.terms.values())


@QUICK
@given(c=st.integers(1, 131072), device=st.sampled_from(["h100", "a100", "b200", "mi300x"]))
def test_max_batch_fits_and_one_more_does_not(c, device):
    hw = get_device(device)
    led = model_ledger(SMALL)
    fit = max_batch(led, hw.capacity(), ctx=c)
    cap = as_float(hw.capacity())
    if fit.value is None or fit.value == 0:
        assert led.total(batch=1, cached_tokens=c, active_tokens=1, capacity=hw.capacity()) > cap
        return
    at = as_float(
        led.total(batch=fit.value, cached_tokens=c, active_tokens=fit.value, capacity=hw.capacity())
    )
    nxt = as_float(
        led.total(batch=fit.value + 1, cached_tokens=c, active_tokens=fit.value + 1, capacity=hw.capacity())
    )
    assert at <= cap < nxt


FORMS = closed_forms(get_model("llama-3.1-8b"), "decode")
SYM = summarize(build_model(get_model("llama-3.1-8b"), "decode", batch=B, ctx=ctx))


@QUICK
@given(b=st.integers(1, 256), c=st.integers(1, 32768))
def test_closed_forms_at_random_points_equal_the_numeric_graph(b, c):
    numeric = summarize(SMALL.graph("decode", batch=b, ctx=c))
    # the symbolic graph's totals, substituted, equal the graph built with numbers
    assert sympy.simplify(SYM.flops.subs({B: b, ctx: c}) - numeric.flops) == 0
    assert sympy.simplify(SYM.dram_bytes.subs({B: b, ctx: c}) - numeric.dram_bytes) == 0
    # and the closed form per token (2 N_matmul + 4 L H d ctx) matches the numeric tensor FLOPs
    per_token = FORMS["tensor_flops_per_token_bound"].subs(ctx, c)
    assert float(per_token * b) == pytest.approx(float(numeric.tensor_flops), rel=1e-12)


MOE = as_workload("mixtral-8x7b")
MOE_FORMS = closed_forms(MOE.config, "decode")


@QUICK
@given(b=st.integers(1, 64), c=st.integers(1, 8192))
def test_moe_closed_forms_equal_the_numeric_graph(b, c):
    """The tidied forms (expected experts touched, (3/4)**B terms) equal the graph built with numbers."""
    numeric = summarize(MOE.graph("decode", batch=b, ctx=c))
    form = MOE_FORMS["dram_bytes_per_step_bound"].subs({B: b, ctx: c})
    assert float(form) == pytest.approx(float(numeric.dram_bytes), rel=1e-12)
