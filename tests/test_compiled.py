"""Compiled step costs equal the symbolic path at random points, and are cached.

The symbolic path is the one the engine used before compilation: build the graph at the point's
*numbers* and read each quantity off it with sympy (``step_time``, ``op_total``, ``bound``). The
compiled path builds the graph once with symbolic dims and evaluates a lambdified function. The
two are independent computations of the same quantity; they must agree to float rounding.
"""

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from costmodel.cost import as_float
from costmodel.errors import CostModelError
from costmodel.graph import edge_bytes_total
from costmodel.hardware import get_device
from costmodel.keys import NodeKind
from costmodel.roofline import bound
from graphs import build_model, decode_report, parallel_plan, prefill_report
from graphs.serving.step.compiled import (
    compiled_cache_info,
    compiled_step,
    step_time,
)
from graphs.serving.step.totals import attention_flops, op_total
from models import get_model
from models.quantization import native_matmul

MODELS = ["tiny", "llama-3.1-8b", "mixtral-8x7b", "deepseek-v3"]
DEVICES = ["h100", "a100", "b200"]


def _on(model: str, hw):
    """The catalog model as the engines run it on ``hw``: deepseek-v3's FP8 checkpoint W8A8 where the
    tensor cores have an FP8 roof, weight-only (W8A16) on the A100 (models.quantization.native_matmul)."""
    cfg, _ = native_matmul(get_model(model).replace(matmul_dtype=None), [hw])
    return cfg


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)


def _symbolic(g, hw):
    """Every compiled field, the old way: sympy on a numeric graph."""
    ops = op_total(g)
    whole = bound(ops, hw)
    bw = as_float(hw.bandwidth())
    return {
        "step_s": as_float(step_time(g, hw)),
        "optimistic_step_s": as_float(whole.lower),
        "weight_read_s": as_float(edge_bytes_total(g, source_kind=NodeKind.WEIGHT)) / bw,
        "kv_read_s": as_float(edge_bytes_total(g, source_kind=NodeKind.KV_CACHE)) / bw,
        "flops": as_float(ops.flops),
        "attention_flops": as_float(attention_flops(g)),
        "terms_s": {k: as_float(v) for k, v in whole.terms.items()},
    }


def _check(compiled: dict, symbolic: dict) -> None:
    for k, v in symbolic.items():
        if k == "terms_s":
            assert compiled[k].keys() == v.keys()
            for t in v:
                assert _close(compiled[k][t], v[t]), (t, compiled[k][t], v[t])
        else:
            assert _close(compiled[k], v), (k, compiled[k], v)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(MODELS),
    device=st.sampled_from(DEVICES),
    batch=st.integers(1, 512),
    ctx=st.integers(1, 131072),
    tp=st.sampled_from([1, 2, 8]),
)
def test_decode_compiled_equals_symbolic(model, device, batch, ctx, tp):
    assume(model != "tiny" or tp == 1)  # tiny's heads do not split 2 or 8 ways
    hw = get_device(device)
    cfg = _on(model, hw)
    c = compiled_step(cfg, hw, "decode", tp=tp)
    _check(c.point(batch, ctx), _symbolic(build_model(cfg, "decode", batch=batch, ctx=ctx, tp=tp), hw))
    assert _close(c.step(batch, ctx), c.point(batch, ctx)["step_s"])
    assert _close(float(c.step_array([batch], [ctx])[0]), c.step(batch, ctx))


@pytest.mark.slow
@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(MODELS),
    device=st.sampled_from(DEVICES),
    batch=st.integers(1, 16),
    seq=st.integers(1, 32768),
    prefix=st.integers(0, 65536),
)
def test_prefill_and_chunk_compiled_equal_symbolic(model, device, batch, seq, prefix):
    hw = get_device(device)
    cfg = _on(model, hw)
    plain = compiled_step(cfg, hw, "prefill")
    _check(plain.point(batch, seq), _symbolic(build_model(cfg, "prefill", batch=batch, seq=seq), hw))
    chunk = compiled_step(cfg, hw, "prefill", chunked=True)
    g = build_model(cfg, "prefill", batch=batch, seq=seq, prefix=prefix)
    assert _close(chunk.step(batch, seq, prefix), as_float(step_time(g, hw)))


def test_expert_parallel_step_equals_scaled_graph():
    """ep gives each device the busiest rank's routed experts (graphs.serving.step.expert_routing.busiest_rank):
    compiled once, equal to the same scaling of the numeric graph."""
    from graphs.serving.step.compiled import _scale_experts

    cfg, hw = get_model("mixtral-8x7b"), get_device("h100")
    g = _scale_experts(build_model(cfg, "decode", batch=64, ctx=4096), 4)
    assert _close(compiled_step(cfg, hw, "decode", ep=4).step(64, 4096), as_float(step_time(g, hw)))
    assert parallel_plan(cfg, hw, batch=64, ctx=4096, ep=4).expert_all_to_all_s > 0


def test_reports_reuse_the_cache():
    before = compiled_cache_info()
    for b in range(1, 30):
        decode_report("tiny", "h100", batch=b, ctx=512)
        prefill_report("tiny", "h100", seq=64 * b)
    after = compiled_cache_info()
    assert after["misses"] - before["misses"] <= 2  # one decode, one prefill compile at most
    assert after["hits"] - before["hits"] >= 56


def test_chunked_prefill_sums_the_chunks():
    """Four chunks of 2048: the sum of four chunk steps at prefixes 0, 2048, 4096, 6144, each
    computed on its own numeric graph."""
    cfg, hw = get_model("llama-3.1-8b"), get_device("h100")
    want = sum(
        as_float(step_time(build_model(cfg, "prefill", batch=1, seq=2048, prefix=p), hw))
        for p in (0, 2048, 4096, 6144)
    )
    assert _close(prefill_report(cfg, hw, seq=8192, chunk=2048).step_s, want)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("batch", 0, "batch must be"), ("batch", True, "batch must be"), ("ctx", 2.5, "ctx must be")],
)
def test_bad_points_are_named(field, value, message):
    kw = {"batch": 1, "ctx": 128, field: value}
    with pytest.raises(CostModelError, match=message):
        decode_report("tiny", "h100", **kw)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    model=st.sampled_from(MODELS),
    phase=st.sampled_from(["prefill", "decode"]),
    batch=st.integers(1, 64),
    n=st.integers(1, 65536),
)
def test_analyze_rows_equal_classify_graph(model, phase, batch, n):
    """analyze() reads its per-node rows off forms compiled once; classify_graph bounds each node
    of a numeric graph built at the point. Same rows, same totals."""
    from costmodel.graph import classify_graph
    from graphs import analyze

    kw = {"seq": n} if phase == "prefill" else {"ctx": n}
    hw = get_device("h100")
    got = analyze(model, hw, phase, batch=batch, **kw)
    g = build_model(get_model(model), phase, batch=batch, **kw)
    want = classify_graph(g, hw)
    # a one-token prompt needs no last-token view (T = B): the symbolic graph keeps a free one
    names = {r.node for r in want}
    extra = [r for r in got.rows if r.node not in names]
    assert all(r.total_time_s == 0 and r.bytes == 0 for r in extra)
    rows = [r for r in got.rows if r.node in names]
    assert [r.node for r in rows] == [r.node for r in want]
    for a, b in zip(rows, want, strict=True):
        assert a.kind == b.kind and a.unbounded == b.unbounded
        for f in ("repeat", "flops", "bytes", "time_s", "total_time_s", "share"):
            assert _close(getattr(a, f), getattr(b, f)), (a.node, f)
    assert _close(got.totals.sum_of_node_bounds_s, as_float(step_time(g, hw)))
