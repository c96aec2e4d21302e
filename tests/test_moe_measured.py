"""Routed experts priced from the corpus's measured fused-MoE kernels (costmodel.measured.moe):
the curve is the parquet rows themselves, a step's experts rest on them (never below their
bound), and a shape the corpus lacks is a neighbour that names its basis."""

import math

import pytest

from costmodel.errors import CostModelError
from costmodel.measured.moe import MoEShape, distribution_for

MIXTRAL_TP2 = MoEShape(hidden=4096, inter=14336 // 2, topk=2, experts=8)  # Mixtral-8x7B, tp 2


def test_distribution_for_maps_the_routing_model():
    assert distribution_for() == "balanced"
    assert distribution_for("zipf", 0.0) == "balanced"  # Zipf 0 is uniform
    # nearest measured exponent: |1.1 - 1.01| = 0.09 < |1.1 - 1.2| = 0.10
    assert distribution_for("zipf", 1.1) == "power_law_1.01"
    assert distribution_for("zipf", 2.0) == "power_law_1.2"
    with pytest.raises(CostModelError, match="histogram"):
        distribution_for("histogram")


def test_shape_key_round_trips_and_refuses_garbage():
    s = MoEShape(2048, 768, 8, 128, ep=4, dtype="fp8_block", gated=False, distribution="power_law_1.2")
    assert MoEShape.from_key(s.key) == s
    with pytest.raises(CostModelError, match="key"):
        MoEShape.from_key("bfloat16 h4096")
    with pytest.raises(CostModelError, match="topk"):
        MoEShape(4096, 7168, 0, 8)


# ------------------------------------------------------------------ on the measured corpus


@pytest.fixture(scope="module")
def parquet_rows():
    """H100 vLLM's balanced bf16 rows of Mixtral's rank shape, read straight from the parquet
    file the corpus chooses (the version directory the wheel names current, else the newest)."""
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    import pandas as pd

    from costmodel.measured.corpus import _table_paths

    (path,) = [p for fw, _, p in _table_paths("h100_sxm", "moe") if fw == "vllm"]
    df = pd.read_parquet(path)
    sel = (
        (df["hidden_size"] == 4096)
        & (df["inter_size"] / df["moe_tp_size"] == 7168)
        & (df["topk"] == 2)
        & (df["num_experts"] == 8)
        & (df["moe_ep_size"] == 1)
        & (df["moe_dtype"] == "bfloat16")
        & (df["distribution"] == "balanced")
        & ~df["kernel_source"].str.contains("nongated")
    )
    # the fastest kernel per token count (the dispatcher's choice), ms -> s
    return (df[sel].groupby("num_tokens")["latency"].min() * 1e-3).to_dict()


def test_a_measured_point_returns_its_own_latency(parquet_rows):
    from costmodel.measured.moe import moe_curve

    c = moe_curve("h100-sxm", "vllm", MIXTRAL_TP2)
    assert c.source == "measured" and c.basis == "" and c.own_device
    tokens = sorted(parquet_rows)
    got = c.at(tokens)
    for t, g in zip(tokens, got, strict=True):
        assert g == parquet_rows[t]  # exactly the row's latency


def test_between_two_measured_counts_the_price_lies_between(parquet_rows):
    from costmodel.measured.moe import moe_curve

    c = moe_curve("h100-sxm", "vllm", MIXTRAL_TP2)
    lo, hi = 1024, 1536
    assert lo in parquet_rows and hi in parquet_rows
    mid = float(c.at([1200])[0])
    a, b = sorted((parquet_rows[lo], parquet_rows[hi]))
    assert a <= mid <= b
    # linear in log T: weight log(1200/1024) / log(1536/1024)
    w = math.log(1200 / 1024) / math.log(1536 / 1024)
    assert mid == pytest.approx(parquet_rows[lo] + w * (parquet_rows[hi] - parquet_rows[lo]), rel=1e-12)
    # beyond the largest measured count: in proportion to the tokens
    top = max(parquet_rows)
    assert float(c.at([2 * top])[0]) == pytest.approx(2 * parquet_rows[top], rel=1e-12)


def test_a_shape_the_corpus_lacks_is_a_neighbour_naming_its_basis(parquet_rows):
    from costmodel.measured.moe import moe_bound_s, moe_curve

    odd = MoEShape(4096, 7000, 2, 8)  # no published model has a 7000-wide expert
    c = moe_curve("h100-sxm", "vllm", odd)
    assert c.source == "neighbour"
    assert "nearest measured shape (h 4096, I/tp 7168, top-2 of 8, ep 1)" in c.basis
    # scaled at each measured count by the ratio of the two shapes' bounds
    t = 8
    ratio = moe_bound_s("h100-sxm", odd, [t])[0] / moe_bound_s("h100-sxm", MIXTRAL_TP2, [t])[0]
    assert 0.9 < ratio < 1.0  # 7000 / 7168 of the weights and FLOPs, nearly
    assert float(c.at([t])[0]) == pytest.approx(parquet_rows[t] * ratio, rel=1e-12)


def test_another_framework_is_a_neighbour():
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured.moe import moe_curve

    # A100's vLLM table holds power-law rows only: its balanced rows come from SGLang
    c = moe_curve("a100-sxm-80gb", "vllm", MIXTRAL_TP2)
    assert c.source == "neighbour" and "other frameworks' kernels" in c.basis


@pytest.fixture(scope="module")
def mixtral_decode():
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from graphs.serving.pricing.predict import predict_step

    return predict_step("mixtral-8x7b", "h100", "decode", batch=8, ctx=1000, tp=2, framework="vllm")


def test_mixtral_decode_experts_rest_on_measured_kernels(mixtral_decode):
    p = mixtral_decode
    experts = {n: nd for n, nd in p.nodes.items() if nd["family"] == "moe"}
    # gate, up and down of the one layer graph (its 32 copies as its repeat); router, combine
    # and the activation are not in the fused kernel's family
    assert sorted(n.rsplit(".", 1)[-1] for n in experts) == ["down_proj", "gate_proj", "up_proj"]
    for nd in experts.values():
        assert nd["source"] in ("measured", "neighbour")
        assert nd["predicted_s"] >= nd["bound_s"]  # physics is a floor
    moe_s = sum(nd["predicted_s"] for nd in experts.values())
    # balanced rows at 8 tokens, the 3 GEMMs' time, 32 layers: the measured step is above its bound
    assert moe_s > p.by_family["moe"]["bound_s"]
    cov = p.coverage
    assert cov is not None
    assert (cov.measured_s + cov.neighbour_s) / cov.total_s >= 0.8
    assert not any("routed-expert" in k for k in cov.bounds)
    # the activation runs inside the fused kernel (vLLM's fused_experts): no small kernel of its own
    (act,) = [nd for n, nd in p.nodes.items() if n.endswith("experts.act")]
    assert act["predicted_s"] == act["bound_s"] and act["source"] == "bound"


def test_expert_groups_put_down_last_and_leave_router_and_combine_out():
    from graphs.serving.pricing.predict import expert_groups
    from graphs.serving.step.compiled import compiled_step

    g = compiled_step("mixtral-8x7b", "h100", "decode", tp=2).graph
    groups = expert_groups(g.nodes(data=True))
    (members,) = set(groups.values())
    assert [m.rsplit(".", 1)[-1] for m in members][-1] == "down_proj"
    assert len(members) == 3
    assert not any(("router" in m) or ("combine" in m) for m in groups)


def test_priced_decode_tabulates_the_experts_above_their_bound():
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    import numpy as np

    from graphs.serving.pricing.predictor import Predictor
    from graphs.serving.pricing.priced import priced_step

    kw = {"tp": 2}
    bound = priced_step("mixtral-8x7b", "h100", "decode", **kw)
    priced = priced_step("mixtral-8x7b", "h100", "decode", predictor=Predictor.of("vllm"), **kw)
    b = np.array([1.0, 8.0, 64.0])
    assert np.all(priced.step_array(b, 1000.0) >= bound.step_array(b, 1000.0))
    cov = priced.coverage_array(b, 1000.0)
    assert (cov.measured_s + cov.neighbour_s) / cov.total_s >= 0.8


@pytest.mark.parametrize(
    ("routing", "ep", "dist"),
    [(None, 2, "balanced"), (("zipf", 1.2), 2, "power_law_1.2"), (("zipf", 1.0), 4, "power_law_1.01")],
)
def test_an_ep_plan_selects_the_measured_ep_and_distribution(routing, ep, dist):
    from costmodel.keys import ROLE, Role
    from graphs.serving.pricing.predict import kernel_row
    from graphs.serving.step.compiled import compiled_step
    from graphs.serving.step.expert_routing import Routing

    r = None if routing is None else Routing(*routing)
    g = compiled_step("mixtral-8x7b", "h100", "decode", tp=1, ep=ep, routing=r).graph
    rows = [
        kernel_row(d, {**d["params"], "tokens": 8})
        for _, d in g.nodes(data=True)
        if d.get(ROLE) == Role.EXPERT
    ]
    assert rows and all(hit is not None for hit in rows)
    assert {(h[1]["ep"], h[1]["distribution"]) for h in rows} == {(ep, dist)}


def test_a_routing_histogram_keeps_the_bound_and_says_why():
    from costmodel.keys import ROLE, Role
    from graphs.serving.pricing.predict import kernel_row, unmeasured_basis
    from graphs.serving.step.compiled import compiled_step
    from graphs.serving.step.expert_routing import Routing

    r = Routing("histogram", weights=(8, 1, 1, 1, 1, 1, 1, 1))
    g = compiled_step("mixtral-8x7b", "h100", "decode", tp=1, ep=2, routing=r).graph
    for _, d in g.nodes(data=True):
        if d.get(ROLE) == Role.EXPERT:
            p = {**d["params"], "tokens": 8}
            assert kernel_row(d, p) is None
            assert "routed-expert GEMMs of an unmeasured kind" in unmeasured_basis(d, p)


# ------------------------------------------------- a harness that times rank 0's clamped workload


def _sglang_rows(
    system: str, hidden: int, inter: int, topk: int, experts: int, dtype: str, kernel: str = ""
) -> tuple[set[str], dict]:
    """A system's SGLang balanced rows of one expert shape at moe_tp 1 (``kernel``: only that
    kernel_source): their versions, and ms by (ep, tokens), read straight from the parquet file."""
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    import pandas as pd

    from costmodel.measured.corpus import corpus_info, table_files

    (rel,) = [p for p in table_files("moe") if f"/{system}/moe/sglang/" in f"/{p}"]
    df = pd.read_parquet(f"{corpus_info().root}/{rel}")
    sel = (
        (df["hidden_size"] == hidden)
        & (df["inter_size"] == inter)
        & (df["moe_tp_size"] == 1)
        & (df["topk"] == topk)
        & (df["num_experts"] == experts)
        & (df["moe_dtype"] == dtype)
        & (df["distribution"] == "balanced")
    )
    if kernel:
        sel &= df["kernel_source"] == kernel
    got = df[sel]
    versions = set(got["version"].astype(str))
    return versions, got.groupby(["moe_ep_size", "num_tokens"])["latency"].min().to_dict()


@pytest.fixture(scope="module")
def a100_sglang_rows():
    """A100 SGLang 0.5.10's balanced bf16 rows of DeepSeek-V3's expert shape (h 7168, I 2048,
    top-8 of 256), ms by (ep, tokens), read straight from the parquet file."""
    versions, rows = _sglang_rows("a100_sxm", 7168, 2048, 8, 256, "bfloat16")
    assert versions == {"0.5.10"}
    return rows


def test_the_clamped_harness_rows_are_a_share_when_memory_bound_and_ep_times_it_when_not(a100_sglang_rows):
    """What the collector's clamp predicts (every kept token runs all k rows on rank 0's experts,
    the remote picks on expert 0), read in the data: at 4,096-16,384 tokens (compute-bound) ep 2,
    4 and 8 take about ep 1's time, ep times a rank's share; at 32 tokens (the weights) 1/ep of it and a
    little more, a share. ep 4's row at T is ep 1's at 4 T / 4 where compute-bound."""
    rows = a100_sglang_rows
    for ep in (2, 4, 8):
        for t in (4096, 8192, 16384):  # the same T k rows on 1/ep of the weights
            assert 0.85 * rows[(1, t)] <= rows[(ep, t)] <= rows[(1, t)]
        # a share, and a little more: rank 0 also reads expert 0, where the remote picks land
        assert rows[(1, 32)] / ep <= rows[(ep, 32)] <= 1.35 * rows[(1, 32)] / ep


def test_the_clamped_harness_prices_a_rank_from_its_ep1_rows(a100_sglang_rows):
    from costmodel.measured.moe import moe_bound_s, moe_curve

    rows = a100_sglang_rows
    shape = MoEShape(7168, 2048, 8, 256, ep=4)
    c = moe_curve("a100-sxm-80gb", "sglang", shape)
    assert c.own_device and c.source == "neighbour"
    assert "sglang 0.5.10's ep 1 rows at 1/ep" in c.basis and "clamped" in c.basis
    tokens = [1, 32, 1024, 16384]
    assert list(c.at(tokens)) == pytest.approx([rows[(1, t)] * 1e-3 / 4 for t in tokens], rel=1e-12)
    # never below the bound where ep 1's rows are not (the bound ratio of the two is 1/ep)
    assert all(c.at(tokens) >= moe_bound_s("a100-sxm-80gb", shape, tokens))
    # ep 1 itself is the rows, measured
    one = moe_curve("a100-sxm-80gb", "sglang", MoEShape(7168, 2048, 8, 256))
    assert one.source == "measured" and float(one.at([32])[0]) == rows[(1, 32)] * 1e-3


def test_power_law_rows_of_the_clamped_harness_fall_back_to_the_balanced_share():
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured.moe import moe_curve

    zipf = MoEShape(7168, 2048, 8, 256, ep=4, distribution="power_law_1.2")
    c = moe_curve("a100-sxm-80gb", "sglang", zipf)
    assert "balanced rows for power_law_1.2 routing" in c.basis and "ep 1 rows at 1/ep" in c.basis
    # other harnesses' ep > 1 rows are read as they are: H200's SGLang 0.5.14 measures this at ep 4
    h200 = moe_curve("h200-sxm", "sglang", MoEShape(2048, 640, 22, 512, ep=4))
    assert h200.source == "measured" and h200.basis == ""


def test_the_fits_leave_the_clamped_harness_ep_rows_out():
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured.corpus import load

    df = load("moe", devices=["a100-sxm-80gb"])
    sg = df[df["framework"] == "sglang"]
    assert len(sg) and set(sg["ep"]) == {1}


def test_a_group_whose_ep2_rows_do_not_halve_is_priced_from_its_ep1_rows():
    """H200's SGLang 0.5.14 fp8_block rows of DeepSeek-V3's expert shape (h 7168, I 2048, top-8 of
    256), read straight from the parquet file, take ep 1's time at ep 2 from 4,096 tokens, where a
    rank's share (half the rows on half the experts) takes half: DeepSeek's grouped top-k over the
    collector's strided logits puts every pick on rank 0's experts. So the group is read as the
    clamped harness is: a rank at ep 8 is priced at ep 1's rows / 8, the basis giving the ratio
    (priced at 14x its bound before). A group whose ep 2 rows halve is still read as measured."""
    from costmodel.measured.corpus import NOT_A_SHARE
    from costmodel.measured.moe import moe_bound_s, moe_curve

    _, rows = _sglang_rows("h200_sxm", 7168, 2048, 8, 256, "fp8_block")
    big = [t for (e, t) in rows if e == 1 and t >= 4096 and (2, t) in rows]
    assert big and all(rows[(2, t)] / rows[(1, t)] >= max(NOT_A_SHARE, 0.95) for t in big)
    shape = MoEShape(7168, 2048, 8, 256, ep=8, dtype="fp8_block")
    c = moe_curve("h200-sxm", "sglang", shape)
    assert c.own_device and c.source == "neighbour"
    assert (
        "ep 1 rows at 1/ep (its ep 2 rows of the shape take 1.0" in c.basis and "not a rank's half" in c.basis
    )
    tokens = [1, 64, 4096]
    assert list(c.at(tokens)) == pytest.approx([rows[(1, t)] * 1e-3 / 8 for t in tokens], rel=1e-12)
    # where it computes, above the bound; at a few tokens the ep 1 rows read only experts 0-127's
    # weights (the same routing), so 1/ep of them can fall under a rank's bound: the caller clamps
    assert c.at([4096])[0] >= moe_bound_s("h200-sxm", shape, [4096])[0]
    # a share: Qwen3.5-397B's bf16 Triton shape (h 4096, I 1024, top-10 of 512) halves at ep 2
    # and keeps its own ep rows
    _, qr = _sglang_rows("h200_sxm", 4096, 1024, 10, 512, "bfloat16", kernel="sglang_fused_moe_triton")
    halves = [qr[(2, t)] / qr[(1, t)] for (e, t) in qr if e == 1 and t >= 4096 and (2, t) in qr]
    assert halves and all(r < NOT_A_SHARE for r in halves)
    own = moe_curve("h200-sxm", "sglang", MoEShape(4096, 1024, 10, 512, ep=2))
    assert own.source == "measured" and own.basis == ""


def test_the_share_test_reads_sglang_at_tp1_and_keeps_a_narrow_share():
    """The verdict is the shape's at moe_tp 1: SGLang's Triton rows of h 2048, I 768, top-8 of 128
    on H100 run from about two thirds of ep 1's time at tp 1 toward 0.8 at tp 16-32 (per-token work
    over every token weighs more as the width narrows), a share, so no tp of the shape is
    replaced; and another harness's rows that do not halve (TensorRT-LLM's min-latency NVFP4 on
    B200, no source saying why) are read as measured."""
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")
    from costmodel.measured.corpus import SHARE_TESTED
    from costmodel.measured.moe import _table

    h100 = _table("h100_sxm")
    shape = (h100["framework"] == "sglang") & (h100["hidden"] == 2048) & (h100["experts"] == 128)
    shape &= (h100["topk"] == 8) & (h100["dtype"] == "bfloat16")
    assert (h100.loc[shape, "ep"] > 1).any() and not (h100.loc[shape, "ep_note"] != "").any()
    # H200's rows of the shape take 1.11 of ep 1's time at ep 2 but fall at ep 4 and 8, where the
    # collector's clamp would keep every token (64 experts a rank against a stride of 16): neither
    # sourced path's signature, read as measured
    h200 = _table("h200_sxm")
    same = (h200["framework"] == "sglang") & (h200["hidden"] == 2048) & (h200["experts"] == 128)
    same &= (h200["topk"] == 8) & (h200["dtype"] == "bfloat16")
    assert (h200.loc[same, "ep"] > 1).any() and not (h200.loc[same, "ep_note"] != "").any()
    b200 = _table("b200_sxm")
    assert SHARE_TESTED == ("sglang",)
    assert not (b200.loc[b200["framework"] == "trtllm", "ep_note"] != "").any()


def test_clamp_kept_by_enumeration_and_its_refusals():
    """The clamp's kept share under the strided routing, counted by hand: Nemotron-3-Super's 512
    experts, top-22 (stride 24): at ep 32 rank 0 holds experts 0-15; token t keeps when some
    t + 24 i (mod 512), i < 22, falls below 16. Bad counts are refused by name."""
    from costmodel.errors import CostModelError
    from costmodel.measured.corpus import clamp_kept

    kept = sum(any((t + 24 * i) % 512 < 16 for i in range(22)) for t in range(512)) / 512
    assert clamp_kept(512, 22, 32) == kept and 0 < kept < 1
    assert clamp_kept(512, 22, 16) == 1.0  # 32 experts a rank >= the stride: every token
    for bad in ({"experts": 0}, {"topk": 2.5}, {"ep": True}):
        args = {"experts": 8, "topk": 2, "ep": 2, **bad}
        with pytest.raises(CostModelError, match=next(iter(bad))):
            clamp_kept(**args)
