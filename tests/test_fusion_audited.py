"""The planner on every audited Hugging Face ATen graph (benchmarks/fusion_planner.py's models:
Llama decoder layer prefill and decode, GPT-2 block, Mixtral sparse-MoE block, Llama attention
without SDPA), each compiled once by Inductor on CPU (cached under out/; slow the first time).

Invariants, not timings: under Inductor's own rules the planner never moves more DRAM bytes than
Inductor's grouping (its kernels are offered, and every plan is priced by one accounting); the
default rules allow every group Inductor's rules do, so the default-rules plan never moves more
than the Inductor-rules one; both solves are certified optimal over a complete enumeration; the
decode and MoE shapes are dynamic and the closed forms of both plans' bytes give the numbers at
the example's sizes.
"""

import importlib
import warnings

import pytest

pytest.importorskip("torch", reason="torch extra not installed")
pytest.importorskip("transformers", reason="transformers not installed")

from costmodel.fusion_plan import solver_available

warnings.filterwarnings("ignore")


def _bench():
    return importlib.import_module("benchmarks.fusion_planner")


#: the dims each model compiles dynamic (prefill-like: the token count; decode: batch and cache)
DYNAMIC = {
    "llama-prefill": {"S"},
    "llama-decode": {"B", "ctx"},
    "gpt2": {"S"},
    "mixtral-moe": {"S"},
    "attention-eager": {"S"},
}


@pytest.mark.slow
@pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")
@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_planner_never_moves_more_than_inductor_and_is_certified(name):
    from graphs.importers.inductor_audit import audit_capture

    bench = _bench()
    cap = bench.capture(name)
    a = audit_capture(cap, "h100")
    same, best = a.planner_same_rules, a.planner
    assert same.bytes <= a.inductor_plan_bytes * (1 + 1e-12)
    assert best.bytes <= same.bytes * (1 + 1e-12)
    assert a.ideal_bytes <= best.bytes
    for r in (same, best):
        assert r.method == "exact" and r.optimal and r.complete
        assert r.gap == pytest.approx(0.0, abs=1e-9)
    # every boundary the planner removes names what Inductor would have to change
    assert all(r.rule for r in a.removed)
    # dynamic shapes: the closed forms of both plans' bytes, at the example, are the numbers
    assert set(a.evaluated_at) == DYNAMIC[name]
    at = {
        s: a.evaluated_at[str(s)]
        for s in a.planner_bytes_expr.free_symbols | a.inductor_bytes_expr.free_symbols
    }
    assert float(a.inductor_bytes_expr.subs(at)) == a.inductor_plan_bytes
    assert float(a.planner_bytes_expr.subs(at)) == best.bytes
    assert "plans chosen and numbers evaluated at" in a.shapes
