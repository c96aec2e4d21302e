"""The fusion planner: hand-derived optima, convexity, legality tables, capacity, recomputation."""

import dataclasses

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import Tensor, get_device
from costmodel.errors import CostModelError
from costmodel.fusion import (
    FusionError,
    FusionPlan,
    Group,
    check_plan,
    plan_cost,
    plan_from_groups,
    unfused_plan,
)
from costmodel.fusion_legality import LEGALITY, claim_level, get_legality, group_violation
from costmodel.fusion_plan import plan_fusions, solver_available
from costmodel.keys import Role
from graphs import GraphBuilder, build_layer, build_model
from graphs.blocks.decomposed import attention_chain
from models import get_model

H100 = get_device("h100")
exact_only = pytest.mark.skipif(not solver_available(), reason="fusion extra (highspy) not installed")


def _norm_gemm_gelu():
    """x[128, 4096] -> rmsnorm -> x W (W[4096, 4096]) -> gelu, all bf16."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="t")
    x = b.source("x", Tensor("x", (128, 4096), "bf16"), "input", resident=False)
    gamma = b.source("gamma", Tensor("gamma", (4096,), "bf16"), "weight")
    w = b.source("w", Tensor("w", (4096, 4096), "bf16"), "weight")
    h = b.op(
        "norm", "rmsnorm", Role.NORM, [x, gamma], [Tensor("t.norm", (128, 4096), "bf16")], rows=128, cols=4096
    )[0]
    y = b.op(
        "gemm", "gemm", Role.LINEAR, [h, w], [Tensor("t.gemm", (128, 4096), "bf16")], M=128, N=4096, K=4096
    )[0]
    b.op(
        "gelu",
        "elementwise",
        Role.ACTIVATION,
        [y],
        [Tensor("t.gelu", (128, 4096), "bf16")],
        n=128 * 4096,
        sfu_ops=1,
    )
    return g


@pytest.mark.parametrize("method", ["heuristic", pytest.param("exact", marks=exact_only)])
def test_capacity_forbids_the_whole_graph_group(method):
    """Hand derivation on an H100 (228 KiB of SMEM per SM; L2 50 MiB / 132 SMs = 397,187 B each).

    Tiles: a group with a GEMM holds 128 x 128 output tiles, widened to 128 full rows when a norm
    shares it; each GEMM adds its working set 2 x (128 + 128) x 64 x 2 + 128^2 x 4 = 131,072 B.

    * {norm, gemm, gelu}: two 128 x 4096 bf16 row tiles (1,048,576 B each) + 131,072 = 2,228,224 B:
      fits neither level;
    * {norm, gemm}: 1,048,576 + 131,072 = 1,179,648 B: fits neither;
    * {gemm, gelu}: one 128 x 128 bf16 tile (32,768 B) + 131,072 = 163,840 B <= 233,472: SMEM.

    So the optimum is {norm}, {gemm, gelu}. Its bytes: the norm reads x (128 x 4096 x 2 = 1,048,576)
    and gamma (8,192) and writes 1,048,576; the GEMM kernel reads that back (1,048,576) and W
    (4096^2 x 2 = 33,554,432) and writes gelu's output (1,048,576): 37,756,928 B.
    """
    g = _norm_gemm_gelu()
    r = plan_fusions(g, H100, objective="bytes", method=method)
    assert sorted(gr.members for gr in r.plan.groups) == [("t.gemm", "t.gelu"), ("t.norm",)]
    assert r.bytes == 1_048_576 + 8_192 + 1_048_576 + 1_048_576 + 33_554_432 + 1_048_576
    (fused,) = [gr for gr in r.groups if len(gr.members) == 2]
    assert fused.level == "smem" and fused.footprint_bytes == 32_768 + 131_072
    whole = claim_level(g, ("t.norm", "t.gemm", "t.gelu"), H100, get_legality())
    assert whole.level is None and whole.footprint_bytes == 2 * 1_048_576 + 131_072
    if method == "exact":
        assert r.optimal and r.gap == pytest.approx(0.0, abs=1e-9)
    # with 4 MiB of SMEM per SM the whole graph is one kernel: x, gamma, W read once, y written once
    big = dataclasses.replace(
        H100,
        memory=tuple(
            dataclasses.replace(m, capacity_bytes=4 * 1024**2) if m.name == "smem" else m for m in H100.memory
        ),
    )
    r = plan_fusions(g, big, objective="bytes", method=method)
    assert [gr.members for gr in r.plan.groups] == [("t.norm", "t.gemm", "t.gelu")]
    assert r.bytes == 1_048_576 + 8_192 + 33_554_432 + 1_048_576


def _diamond_through_collective():
    """a -> all_reduce -> c and a -> c: a and c are elementwise, the all-reduce runs alone."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="d")
    x = b.source("x", Tensor("x", (1024,), "bf16"), "input", resident=False)
    a = b.op("a", "elementwise", Role.ACTIVATION, [x], [Tensor("d.a", (1024,), "bf16")], n=1024)[0]
    r = b.op("ar", "all_reduce", Role.COLLECTIVE, [a], [Tensor("d.ar", (1024,), "bf16")], elements=1024, p=8)[
        0
    ]
    b.op("c", "elementwise", Role.ACTIVATION, [a, r], [Tensor("d.c", (1024,), "bf16")], n=1024, inputs=2)
    return g


@pytest.mark.parametrize("method", ["heuristic", pytest.param("exact", marks=exact_only)])
def test_convexity_forbids_the_greedy_merge(method):
    """Merging a with c would save a's 2,048 B write and c's read of it (a pair with an edge, the
    greedy choice), but the path a -> all_reduce -> c leaves the group and re-enters: not convex,
    and the all-reduce may not join. The planner keeps three kernels."""
    g = _diamond_through_collective()
    merged = plan_from_groups(g, [Group("ac", ("d.a", "d.c"))])
    issues = check_plan(g, merged)
    assert issues and issues[0].path == ("d.a", "d.ar", "d.c")
    assert plan_cost(g, merged, check=False).bytes < plan_cost(g, unfused_plan(g)).bytes
    r = plan_fusions(g, H100, method=method)
    assert sorted(gr.members for gr in r.plan.groups) == [("d.a",), ("d.ar",), ("d.c",)]
    assert r.bytes == float(plan_cost(g, unfused_plan(g)).bytes)


@pytest.mark.parametrize("method", ["heuristic", pytest.param("exact", marks=exact_only)])
def test_attention_chain_reaches_flash_attention(method):
    """The score -> softmax -> value chain is one kernel under the FlashAttention template: Q, K,
    V read and O written once, 4.19 MB at N = 4096, d = 128 (the figure test_fusion pins for the
    hand-made group); Inductor's rules keep the GEMMs as library calls: the naive 138.41 MB."""
    g = attention_chain(4096, 128)
    r = plan_fusions(g, H100, method=method)
    assert [gr.members for gr in r.plan.groups] == [("attn.qk", "attn.softmax", "attn.pv")]
    assert round(r.bytes / 1e6, 2) == 4.19 and r.groups[0].level == "smem"
    ind = plan_fusions(g, H100, backend="inductor", method=method)
    assert round(ind.bytes / 1e6, 2) == 138.41 and len(ind.plan.groups) == 3


def test_legality_tables_and_their_errors():
    g = attention_chain(64, 16)
    two = ("attn.qk", "attn.softmax", "attn.pv")
    assert group_violation(g, two, LEGALITY["default"]) is None  # the FlashAttention template
    no_tmpl = get_legality("default", templates=())
    assert "max_anchors: 2 GEMM-class ops" in group_violation(g, two, no_tmpl)
    assert "fusible: class 'gemm'" in group_violation(g, ("attn.qk", "attn.softmax"), LEGALITY["inductor"])
    assert "epilogue: class 'reduction'" in group_violation(
        g, ("attn.qk", "attn.softmax"), LEGALITY["cublaslt"]
    )
    with pytest.raises(FusionError, match="backend must be one of"):
        get_legality("tvm")
    with pytest.raises(FusionError, match="fusible has unknown op classes"):
        get_legality("default", fusible={"elementwise", "matmul"})
    with pytest.raises(FusionError, match="no field"):
        get_legality("default", max_anchor=2)
    with pytest.raises(CostModelError, match="objective must be one of"):
        plan_fusions(g, H100, objective="energy")


def test_symbolic_graph_is_refused():
    import sympy

    g = attention_chain(sympy.Symbol("N", positive=True, integer=True), 16)
    with pytest.raises(CostModelError, match="needs a numeric graph"):
        plan_fusions(g, H100)


def test_without_the_solver_the_heuristic_runs_and_says_so(monkeypatch):
    import costmodel.fusion_plan as fp

    monkeypatch.setattr(fp, "solver_available", lambda: False)
    r = fp.plan_fusions(attention_chain(256, 64), H100)
    assert r.method == "heuristic" and not r.optimal and r.gap is None
    assert any("heuristic plan, no optimality gap" in n for n in r.notes)
    with pytest.raises(CostModelError, match="needs the fusion extra"):
        fp.plan_fusions(attention_chain(256, 64), H100, method="exact")


def test_recomputation_duplicates_a_cheap_producer_into_both_gemms():
    """x -> a (elementwise) -> two GEMMs b, c (M = 64, K = N = 256, bf16). Without recomputation
    the best plan fuses a into one GEMM's prologue; the other reads a's output back (a written,
    32,768 B, and read, 32,768 B). Duplicating a into both kernels reads x twice instead
    (2 x 32,768) and writes nothing for a: 32,768 B saved, a's 64 x 256 FLOPs counted twice."""
    g = nx.DiGraph()
    bl = GraphBuilder(g, phase="none", group="r")
    x = bl.source("x", Tensor("x", (64, 256), "bf16"), "input", resident=False)
    a = bl.op("a", "elementwise", Role.ACTIVATION, [x], [Tensor("r.a", (64, 256), "bf16")], n=64 * 256)[0]
    for name in ("b", "c"):
        w = bl.source(f"w{name}", Tensor(f"w{name}", (256, 256), "bf16"), "weight")
        bl.op(name, "gemm", Role.LINEAR, [a, w], [Tensor(f"r.{name}", (64, 256), "bf16")], M=64, N=256, K=256)
    # without horizontal GEMMs (with them b and c run as one GEMM over concatenated weights, a
    # fused into its prologue: nothing left to recompute)
    vertical = get_legality("default", horizontal=())
    plain = plan_fusions(g, H100, backend=vertical, objective="bytes", method="heuristic")
    again = plan_fusions(g, H100, backend=vertical, objective="bytes", method="heuristic", recompute=True)
    assert plain.bytes - again.bytes == 32_768
    assert again.plan.recompute == frozenset({"r.a"})
    assert again.flops - plain.flops == 64 * 256


def test_plans_are_handed_back_as_groups():
    g = attention_chain(256, 64)
    r = plan_fusions(g, H100, method="heuristic")
    d = r.to_dict()
    assert d["plan"]["groups"][0]["members"] == ["attn.qk", "attn.softmax", "attn.pv"]
    back = FusionPlan(tuple(Group(**{**gr, "members": tuple(gr["members"])}) for gr in d["plan"]["groups"]))
    assert plan_cost(g, back).bytes == plan_cost(g, r.plan).bytes  # same groups, same cost


@exact_only
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_llama_layer_exact_is_certified_and_the_heuristic_is_close(phase):
    """The exact plan of a Llama-3.1-8B layer is certified (gap 0, full enumeration); the heuristic
    on the whole 32-layer model (the repeated layer counted once, times 32) is within 5 % of it on
    the layer, and neither moves more than the engine's pattern suggestion."""
    from costmodel.fusion_audit import audit, suggest_fusions

    cfg = get_model("llama-3.1-8b")
    layer = build_layer(cfg, phase, batch=1, seq=4096, ctx=4096)
    exact = plan_fusions(layer, H100, method="exact")
    assert exact.optimal and exact.complete and exact.gap == pytest.approx(0.0, abs=1e-9)
    model = build_model(cfg, phase, batch=1, seq=4096, ctx=4096)
    heur = plan_fusions(model, H100, method="heuristic")
    reps = [gr for gr in heur.groups if any(m.startswith("layers.") for m in gr.members)]
    layer_time = sum(gr.time_s for gr in reps) / cfg.num_hidden_layers
    assert layer_time <= 1.05 * exact.time_s
    assert exact.time_s <= plan_fusions(layer, H100, method="heuristic").time_s * (1 + 1e-9)
    sugg = audit(layer, H100, suggest_fusions(layer, H100)[1]).plan
    assert exact.time_s <= sugg.sum_of_kernel_bounds_s * (1 + 1e-9)


@st.composite
def dags(draw, gemms=True):
    """Random DAGs of 64 x 64 bf16 ops over one input: elementwise (one or two inputs) and, with
    ``gemms``, GEMMs against their own weights."""
    n = draw(st.integers(3, 9))
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="p")
    refs = [b.source("x", Tensor("x", (64, 64), "bf16"), "input", resident=False)]
    for i in range(n):
        k = draw(st.integers(1, min(2, len(refs))))
        picks = draw(st.lists(st.sampled_from(range(len(refs))), min_size=k, max_size=k, unique=True))
        ins = [refs[j] for j in picks]
        if gemms and draw(st.booleans()) and len(ins) == 1:
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
            )
        else:
            out = b.op(
                f"o{i}",
                "elementwise",
                Role.ACTIVATION,
                ins,
                [Tensor(f"p.o{i}", (64, 64), "bf16")],
                n=64 * 64,
                inputs=len(ins),
            )
        refs.append(out[0])
    return g


@exact_only
@settings(max_examples=25, deadline=None)
@given(g=dags())
def test_exact_is_never_worse_than_the_heuristic_nor_the_unfused_plan(g):
    ex = plan_fusions(g, H100, method="exact")
    he = plan_fusions(g, H100, method="heuristic")
    assert not check_plan(g, ex.plan) and not check_plan(g, he.plan)
    assert ex.optimal
    # objective: kernel time + 1e-3 x DRAM time; the exact one is the least over every plan
    w = lambda r: r.time_s + 1e-3 * r.bytes / float(H100.bandwidth())  # noqa: E731
    assert w(ex) <= w(he) * (1 + 1e-6)
    assert ex.bytes <= float(plan_cost(g, unfused_plan(g)).bytes)


def test_fusion_plan_command(capsys):
    import json

    from graphs.cli import main

    code = main(["fusion", "plan", "llama-3.1-8b", "--phase", "prefill", "--seq", "4096", "--device", "h100"])
    out = capsys.readouterr().out
    assert code == 0 and "fused kernels, most time saved first" in out and "planner" in out and "ideal" in out
    assert main(["fusion", "plan", "tiny", "--json", "--method", "heuristic"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["method"] == "heuristic" and data["plan"]["groups"]
    assert main(["fusion", "plan", "tiny", "--backend", "tvm"]) == 2
    assert "backend (--backend) must be one of" in capsys.readouterr().err


def test_plan_fusion_pass_in_a_pipeline():
    from costmodel.passes import Pipeline, plan_fusion, report, suggest_fusion

    g = build_layer(get_model("tiny"), "decode", batch=1, ctx=8)
    out = Pipeline([suggest_fusion("h100"), plan_fusion("h100", method="heuristic"), report()])(g)
    reps = out.graph["reports"]
    assert list(reps) == ["suggest_fusion", "plan_fusion", "report"]
    planned = reps["plan_fusion"]
    assert planned["audit"]["plan"]["dram_bytes"] <= reps["suggest_fusion"]["audit"]["plan"]["dram_bytes"] * (
        1 + 1e-9
    )


def _qkv():
    """x[64, 256] bf16 read by three GEMMs (q, k, v: W[256, 256] each), their outputs the graph's."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="h")
    x = b.source("x", Tensor("x", (64, 256), "bf16"), "input", resident=False)
    for name in ("q", "k", "v"):
        w = b.source(f"w{name}", Tensor(f"w{name}", (256, 256), "bf16"), "weight")
        b.op(name, "gemm", Role.LINEAR, [x, w], [Tensor(f"h.{name}", (64, 256), "bf16")], M=64, N=256, K=256)
    return g


@pytest.mark.parametrize("method", ["heuristic", pytest.param("exact", marks=exact_only)])
def test_horizontal_gemms_read_their_shared_input_once(method):
    """Hand derivation: x is 64 x 256 x 2 = 32,768 B, each weight 131,072 B, each output 32,768 B.
    Three kernels: 3 x (32,768 + 131,072 + 32,768) = 589,824 B. With horizontal GEMMs the three
    siblings run as one GEMM over concatenated weights: x read once, 589,824 - 2 x 32,768 =
    524,288 B; one 128 x 128 working set (131,072 B) fits SMEM."""
    g = _qkv()
    plain = plan_fusions(g, H100, objective="bytes", method=method)
    assert plain.bytes == 3 * (32_768 + 131_072 + 32_768) and len(plain.plan.groups) == 3
    wide = get_legality("default", horizontal={"gemm"})
    r = plan_fusions(g, H100, backend=wide, objective="bytes", method=method)
    assert [gr.members for gr in r.plan.groups] == [("h.q", "h.k", "h.v")]
    assert r.bytes == 589_824 - 2 * 32_768 == 524_288
    assert r.groups[0].footprint_bytes == 131_072 and r.groups[0].level == "smem"


@exact_only
@settings(max_examples=30, deadline=None)
@given(g=dags(gemms=False), backend=st.sampled_from(["inductor", "default"]))
def test_premerging_keeps_the_bytes_optimum(g, backend):
    """The exchange argument of the pre-merge: the certified DRAM-bytes optimum with chain links
    merged first equals the one without (a second, independent solve over every group)."""
    merged = plan_fusions(g, H100, backend=backend, objective="bytes", method="exact", premerge=True)
    full = plan_fusions(g, H100, backend=backend, objective="bytes", method="exact", premerge=False)
    assert merged.optimal and full.optimal and full.premerged == 0
    assert merged.bytes == full.bytes


def test_a_split_tensor_read_in_parts_counts_every_part():
    """y[64, 192] fp32 split into three [64, 64] parts (views), each read by its own op, all in one
    group with the split: the group reads 3 x 16,384 = 49,152 B of y (it counted 16,384, the
    largest part, when reads were one per producer)."""
    from costmodel.fusion import group_cost

    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="s")
    y = b.source("y", Tensor("y", (64, 192), "fp32"), "input", resident=False)
    parts = b.op(
        "split",
        "view",
        Role.VIEW,
        [y],
        [Tensor(f"s.part{i}", (64, 64), "fp32") for i in range(3)],
        elements=64 * 192,
    )
    for i, p in enumerate(parts):
        b.op(f"e{i}", "elementwise", Role.ACTIVATION, [p], [Tensor(f"s.e{i}", (64, 64), "fp32")], n=64 * 64)
    gr = Group("all", ("s.split", "s.e0", "s.e1", "s.e2"))
    c = group_cost(g, plan_from_groups(g, [gr]), gr)
    assert c.bytes_read() == 3 * 16_384  # the three parts, 64 x 64 x 4 B each


def test_a_weight_view_inside_the_gemm_kernel_adds_no_tile():
    """The capacity inconsistency behind the audit's old attention row: a view of a weight (a
    transpose) inside a GEMM's kernel added a tile of the weight on top of the GEMM working set,
    so whether a group fit depended on where a zero-cost view sat. Hand derivation as in
    test_capacity_forbids_the_whole_graph_group: {gemm, gelu} holds one 128 x 128 bf16 tile of the
    GEMM output (32,768 B) plus the working set (131,072 B), with or without the transpose."""
    g = nx.DiGraph()
    b = GraphBuilder(g, phase="none", group="v")
    x = b.source("x", Tensor("x", (128, 4096), "bf16"), "input", resident=False)
    w = b.source("w", Tensor("w", (4096, 4096), "bf16"), "weight")
    wt = b.op("wt", "view", Role.VIEW, [w], [Tensor("v.wt", (4096, 4096), "bf16")], elements=4096 * 4096)[0]
    y = b.op(
        "gemm", "gemm", Role.LINEAR, [x, wt], [Tensor("v.y", (128, 4096), "bf16")], M=128, N=4096, K=4096
    )[0]
    b.op("gelu", "elementwise", Role.ACTIVATION, [y], [Tensor("v.g", (128, 4096), "bf16")], n=128 * 4096)
    leg = get_legality()
    with_view = claim_level(g, ("v.wt", "v.gemm", "v.gelu"), H100, leg)
    without = claim_level(g, ("v.gemm", "v.gelu"), H100, leg)
    assert with_view.footprint_bytes == without.footprint_bytes == 32_768 + 131_072
    assert with_view.level == "smem"


@exact_only
def test_a_certified_plan_is_never_worse_than_the_suggestion_and_fit_has_one_measure(capsys):
    """Tiny's fp32 prefill layer at 64 tokens: the gated MLP's dual GEMM holds two blocked GEMM
    working sets of 2 x (128 + 128) x 64 x 4 B + 128 x 128 x 4 B = 196,608 B each plus its
    internal tiles, more than an H100 SM's 228 KiB of shared memory or its L2 share (50 MiB over
    132 SMs: 397,188 B). The audit suggested it anyway ('fits' at 65,536 B, its intermediates
    alone), so the suggested plan (619.01 KB) beat the planner's 'certified optimal' one (676.35
    KB). One measure of fit now: the suggestion leaves the group out and says why, the audit's
    footprints are the planner's working sets, and the certified plan is at most the suggestion."""
    from costmodel import notes
    from costmodel.fusion_audit import audit, suggest_fusions
    from costmodel.fusion_legality import level_capacity, working_set_bytes

    g = build_layer(get_model("tiny"), "prefill", batch=1, seq=64, ctx=64)
    notes.clear()
    sugg, plan = suggest_fusions(g, H100)
    said = notes.said()
    assert any("gate_proj+up_proj+act" in s and "not suggested" in s for s in said), said
    assert not any(s.group.name == "gate_proj+up_proj+act" for s in sugg)
    gated = ("layer.mlp.gate_proj", "layer.mlp.up_proj", "layer.mlp.act")
    leg = get_legality("default")
    claim = claim_level(g, gated, H100, leg)
    assert claim.level is None and claim.footprint_bytes >= 2 * 196_608
    assert level_capacity(H100, "l2") == pytest.approx(50 * 2**20 / 132)
    rep = audit(g, H100, plan)
    for f, gr in zip(rep.footprints, [gr for gr in plan.groups if len(gr.members) > 1], strict=True):
        assert f.footprint_bytes == working_set_bytes(g, gr, leg) and f.fits
        assert f.capacity_bytes == level_capacity(H100, gr.level)
    best = plan_fusions(g, H100, method="exact")
    assert best.optimal
    assert best.time_s <= rep.plan.sum_of_kernel_bounds_s * (1 + 1e-9)
    assert best.bytes <= rep.plan.dram_bytes


def test_a_device_with_no_sm_count_is_said_to_have_no_l2_share_not_no_l2():
    """Gaudi 3 states 96 MiB of L2 but no SM count: one SM's share (the measure the planner and the
    audit use) is unknown, and the audit said the device 'gives no l2 capacity'."""
    from costmodel.fusion import Group, plan_from_groups
    from costmodel.fusion_audit import audit

    gaudi = get_device("gaudi3")
    l2 = next(m for m in gaudi.memory if m.name == "l2")
    assert l2.capacity_bytes is not None and not gaudi.sm_count
    g = build_layer(get_model("llama-3.1-8b"), "decode", batch=1, seq=1, ctx=64)
    grp = Group("o", ("layer.o_proj", "layer.attn_residual"), level="l2", tile_rows=128, tile_cols=128)
    rep = audit(g, gaudi, plan_from_groups(g, [grp]))
    said = [str(i) for i in rep.issues]
    assert any("states no SM count, so one SM's share of its l2 is unknown" in s for s in said), said
    assert rep.footprints[0].capacity_bytes is None and rep.footprints[0].fits is None
