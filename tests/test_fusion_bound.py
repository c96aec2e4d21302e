"""The clique-partition traffic floor (costmodel.fusion_bound) and the anchor pruning it shares.

The floor must lie below every plan (checked against the monolithic exact solve on random
graphs), the conflicts it keeps must never split a legal group, the enumeration's new pruning
must drop no legal group, and on a hand-sized graph the floor is derived by hand."""

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import Tensor, get_device
from costmodel.fusion import free_ops_memo
from costmodel.fusion_bound import partition_traffic_floor
from costmodel.fusion_legality import get_legality
from costmodel.fusion_plan import _bits, _conflicts, _enumerate, _Space, plan_fusions, solver_available
from costmodel.keys import Role
from graphs import GraphBuilder
from tests.test_fusion_regions import _ew, _weight, dags_with_barriers

H100 = get_device("h100")
pytestmark = pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")


def _space(g):
    return _Space(g, H100, get_legality("default"), "time")


def _gemm(b, name, x):
    w = b.source(f"w.{name}", Tensor(f"w.{name}", (64, 64), "bf16"), "weight")
    return b.op(name, "gemm", Role.LINEAR, [x, w], [Tensor(f"p.{name}", (64, 64), "bf16")], M=64, N=64, K=64)[
        0
    ]


def test_two_gemms_reading_one_prologue_floor_by_hand():
    """x -> e -> {G1, G2}: e (elementwise) may be the prologue of either GEMM, not of both, and the
    GEMMs never share a kernel (no template: their outputs never meet). Every tensor is 64 x 64
    bf16 = 8,192 B. The best plan {e, G1}, {G2} reads x, W1 (kernel 1) and e's output, W2
    (kernel 2), and writes e's output and both GEMM outputs: 7 x 8,192 = 57,344 B; the one-kernel
    floor would be x, W1, W2 in and two outputs out, 5 x 8,192 = 40,960 B."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="p")
    x = b.source("x", Tensor("x", (64, 64), "bf16"), "input", resident=False)
    e = _ew(b, "e", [x])
    _gemm(b, "G1", e)
    _gemm(b, "G2", e)
    with free_ops_memo(g):
        sp = _space(g)
        region = (1 << len(sp.units)) - 1
        conf = _conflicts(sp, region)
        fl = partition_traffic_floor(g, sp.units, _bits(region), conf)
    assert len(conf) == 1  # the two GEMMs
    assert fl.exact and fl.bytes == 7 * 8192 == 57_344
    r = plan_fusions(g, H100, method="exact")
    assert r.optimal and r.bytes == 57_344


@settings(max_examples=30, deadline=None)
@given(g=dags_with_barriers())
def test_conflicts_never_split_a_legal_group(g):
    """Every legal group the complete enumeration finds holds no conflicting pair (the relaxation
    keeps every plan), and the pruning of hopeless anchor groups drops none of them."""
    with free_ops_memo(g):
        sp = _space(g)
        full = (1 << len(sp.units)) - 1
        conf = _conflicts(sp, full)
        found, complete = _enumerate(sp, 64, 10**6)
        assert complete
        for mask in found:
            ids = _bits(mask)
            assert not any((a, b) in conf for a in ids for b in ids if a < b)
        unpruned = _space(g)
        unpruned.hopeless = lambda mask, pool: False  # type: ignore[method-assign]
        again, _ = _enumerate(unpruned, 64, 10**6)
        assert set(again) == set(found)


@settings(max_examples=30, deadline=None)
@given(g=dags_with_barriers(), objective=st.sampled_from(["time", "bytes"]))
def test_floor_is_below_the_certified_optimum(g, objective):
    """(1 + 1e-3) x floor / bandwidth is at most the monolithic optimum's objective (module doc of
    costmodel.fusion_bound: every kernel weighs at least its DRAM time with the tie-break)."""
    whole = plan_fusions(g, H100, objective=objective, method="exact", decompose=False)
    assert whole.optimal
    with free_ops_memo(g):
        sp = _Space(g, H100, get_legality("default"), objective)
        full = (1 << len(sp.units)) - 1
        fl = partition_traffic_floor(g, sp.units, _bits(full), _conflicts(sp, full))
    best = (
        _weight(whole) if objective == "time" else whole.bytes / float(H100.bandwidth()) + 1e-3 * whole.time_s
    )
    assert (1 + 1e-3) * fl.bytes / float(H100.bandwidth()) <= best * (1 + 1e-9)
