"""The exact fusion planner solved region by region equals the monolithic solve.

Regions (:func:`costmodel.fusion_plan._regions`) are the components of the units that may share
a kernel, split at units that run alone (a collective here); the decomposed solve must reach the
monolithic optimum, also where the regions' own optima together form a cycle of kernels.
"""

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import Tensor, get_device
from costmodel.fusion import check_plan
from costmodel.fusion_plan import plan_fusions, solver_available
from costmodel.keys import Role
from graphs import GraphBuilder

H100 = get_device("h100")
pytestmark = pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")


def _quotient_acyclic(g, plan) -> bool:
    home = {m: gr.name for gr in plan.groups for m in gr.members}
    q = nx.DiGraph()
    q.add_nodes_from(set(home.values()))
    q.add_edges_from(
        (home[u], home[v]) for u, v in g.edges() if u in home and v in home and home[u] != home[v]
    )
    return nx.is_directed_acyclic_graph(q)


def _weight(r) -> float:
    """The planner's objective (time + 1e-3 x DRAM time; module doc of costmodel.fusion_plan)."""
    return r.time_s + 1e-3 * r.bytes / float(H100.bandwidth())


def _ew(b, name, ins, n=64 * 64):
    return b.op(
        name,
        "elementwise",
        Role.ACTIVATION,
        ins,
        [Tensor(f"p.{name}", (64, 64), "bf16")],
        n=n,
        inputs=len(ins),
    )[0]


def _alone(b, name, x):
    return b.op(
        name,
        "all_reduce",
        Role.COLLECTIVE,
        [x],
        [Tensor(f"p.{name}", (64, 64), "bf16")],
        elements=64 * 64,
        p=8,
    )[0]


@st.composite
def dags_with_barriers(draw):
    """Random DAGs of 64 x 64 bf16 ops over one input: elementwise ops (one or two inputs), GEMMs
    against their own weights, and all-reduces (which run alone: region boundaries)."""
    n = draw(st.integers(4, 10))
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="p")
    refs = [b.source("x", Tensor("x", (64, 64), "bf16"), "input", resident=False)]
    for i in range(n):
        k = draw(st.integers(1, min(2, len(refs))))
        picks = draw(st.lists(st.sampled_from(range(len(refs))), min_size=k, max_size=k, unique=True))
        ins = [refs[j] for j in picks]
        kind = draw(st.sampled_from(["ew", "ew", "gemm", "alone"])) if len(ins) == 1 else "ew"
        if kind == "gemm":
            w = b.source(f"w{i}", Tensor(f"w{i}", (64, 64), "bf16"), "weight")
            out = b.op(
                f"o{i}",
                "gemm",
                Role.LINEAR,
                [*ins, w],
                [Tensor(f"p.o{i}", (64, 64), "bf16")],
                M=64,
                N=64,
                K=64,
            )[0]
        elif kind == "alone":
            out = _alone(b, f"o{i}", ins[0])
        else:
            out = _ew(b, f"o{i}", ins)
        refs.append(out)
    return g


@settings(max_examples=40, deadline=None)
@given(g=dags_with_barriers(), objective=st.sampled_from(["time", "bytes"]))
def test_regions_reach_the_monolithic_optimum(g, objective):
    """The sum of region optima (cycles across regions merged and re-solved) is the optimum of
    the whole: both solves certified, equal objectives, a valid plan with an acyclic quotient."""
    split = plan_fusions(g, H100, objective=objective, method="exact")
    whole = plan_fusions(g, H100, objective=objective, method="exact", decompose=False)
    assert split.optimal and whole.optimal and whole.regions == 1
    assert split.regions >= 1
    assert not check_plan(g, split.plan) and _quotient_acyclic(g, split.plan)
    key = _weight if objective == "time" else (lambda r: r.bytes)
    assert key(split) == pytest.approx(key(whole), rel=1e-9)


def _cross_region_cycle():
    """Two regions whose own optima make a cycle of kernels through two all-reduces S and T:

    z1 -> x1 -> S -> x2 -> w2 <- y2 -> T -> y1 <- z1

    Region A = {z1, x1, y1} (linked through z1), region B = {x2, y2, w2} (linked through w2).
    Each region alone fuses all three (every fusion saves a 8,192 B write and its read), but
    then A -> S -> B -> T -> A: no schedule. The merged solve must split one of them."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="p")
    x = b.source("x", Tensor("x", (64, 64), "bf16"), "input", resident=False)
    z1 = _ew(b, "z1", [x])
    x1 = _ew(b, "x1", [z1])
    s = _alone(b, "S", x1)
    y2 = _ew(b, "y2", [x])
    t = _alone(b, "T", y2)
    _ew(b, "y1", [z1, t])
    x2 = _ew(b, "x2", [s])
    _ew(b, "w2", [x2, y2])
    return g


def test_a_cycle_across_regions_is_merged_and_solved_again():
    g = _cross_region_cycle()
    split = plan_fusions(g, H100, objective="bytes", method="exact")
    whole = plan_fusions(g, H100, objective="bytes", method="exact", decompose=False)
    assert split.optimal and whole.optimal
    assert _quotient_acyclic(g, split.plan) and not check_plan(g, split.plan)
    # four regions at first (A, B, S, T); A and B merged once their optima made a cycle
    assert split.regions == 4
    assert split.bytes == whole.bytes
    sizes = sorted(len(gr.members) for gr in split.plan.groups)
    # both three-op groups cannot stand together: one of A, B stays split
    assert sizes.count(3) == 1


@settings(max_examples=30, deadline=None)
@given(g=dags_with_barriers())
def test_a_truncated_enumeration_reports_a_gap_that_holds(g):
    """Groups capped at two units: where a larger group was cut off, the lower bound the result
    implies (value x (1 - gap), the cut regions bounded by their one-kernel or clique-partition
    floor) is at most the certified optimum of the full solve, and a result certified all the
    same (the partition floor's plan meets it) has the optimum's objective."""
    cut = plan_fusions(g, H100, method="exact", max_units=2)
    full = plan_fusions(g, H100, method="exact")
    assert full.optimal and full.complete
    assert _weight(full) <= _weight(cut) * (1 + 1e-9)
    if not cut.complete:
        assert cut.gap is not None
        assert _weight(cut) * (1 - cut.gap) <= _weight(full) * (1 + 1e-9)
    if cut.optimal:
        assert _weight(cut) == pytest.approx(_weight(full), rel=1e-9)
