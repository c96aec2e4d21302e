"""Kernels as the engines run them: sibling projections fused into one GEMM, FP8 GEMMs of a
checkpoint with static activation scales, and the small unmeasured ops as the engine's kernels,
each at least the device's shortest measured kernel (graphs.serving.pricing.predict).

The grouping tests run everywhere. The pricing tests read the measured corpus (the [measured]
extra) and are marked slow. Their independent references: the wheel's own ``fp8_static`` GEMM
queries (aiconfigurator-core 0.12.0's compiled engine, ``GEMMQuantMode.fp8_static``: its ``fp8``
table time minus its compute_scale table, 18.49 - 11.30 us for a 1 x 4096 x 4096 GEMM on H100
with TensorRT-LLM 1.3.0rc20), and the price of one GEMM of the summed width.
"""

from __future__ import annotations

import numpy as np
import pytest

from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from costmodel.keys import MERGED
from graphs.serving.pricing.predict import (
    fused_row,
    projection_groups,
    small_kernel_groups,
    small_kernel_times,
)
from graphs.serving.pricing.predictor import Predictor
from graphs.serving.step.compiled import compiled_step
from models.resolver import resolve_model

H100 = get_device("h100")


def _groups(model: str) -> set[tuple[str, ...]]:
    g = compiled_step(resolve_model(model), H100, "decode", tp=1).graph
    return set(projection_groups(g.nodes(data=True)).values())


def test_llama_fuses_qkv_and_gate_up_only():
    # vLLM's LlamaAttention.qkv_proj (QKVParallelLinear) and LlamaMLP.gate_up_proj
    # (MergedColumnParallelLinear): two fused GEMMs; o_proj and down_proj read other tensors
    assert _groups("llama-3.1-8b") == {
        ("layers.q_proj", "layers.k_proj", "layers.v_proj"),
        ("layers.mlp.up_proj", "layers.mlp.gate_proj"),
    }


def test_mla_fuses_its_down_projections_and_keeps_the_router_apart():
    # vLLM's DeepSeek-V2/V3 fused_qkv_a_proj (q_a and kv_a read the hidden state); the router
    # (role router) reads the same tensor but is its own kernel
    groups = _groups("deepseek-v3")
    assert ("moe.q_a_proj", "moe.kv_a_proj") in groups
    assert ("moe.shared.up_proj", "moe.shared.gate_proj") in groups
    assert not any("router" in n for g in groups for n in g)


def test_layers_the_engines_build_apart_stay_apart():
    # DSA's indexer (vLLM's and SGLang's Indexer: wq_b, wk and weights_proj are ReplicatedLinear
    # layers of their own) reads the same input as q_a/kv_a and q_b; Qwen3-Next's
    # shared_expert_gate reads the shared expert's input, and its gated delta net's in_proj_qkvz
    # and in_proj_ba are two layers: none of them joins a fused GEMM
    dsa = _groups("deepseek-v3.2")
    assert ("dsa_moe.q_a_proj", "dsa_moe.kv_a_proj") in dsa
    assert not any("index" in n for g in dsa for n in g)
    nxt = _groups("qwen3-next-80b-a3b")
    assert ("gqa_moe.q_gate_proj", "gqa_moe.q_proj", "gqa_moe.k_proj", "gqa_moe.v_proj") in nxt
    assert ("gqa_moe.shared.up_proj", "gqa_moe.shared.gate_proj") in nxt
    assert not any(n.endswith(("shared_gate", "in_proj_qkvz", "in_proj_ba")) for g in nxt for n in g)


def test_blocks_declare_the_gemm_a_projection_runs_in():
    """The block that builds a projection records the engines' merged GEMM (``MERGED``); the
    layer-name map is only for imported graphs, whose nodes carry none."""
    g = compiled_step(resolve_model("llama-3.1-8b"), H100, "decode", tp=1).graph
    nodes = dict(g.nodes(data=True))
    assert nodes["layers.q_proj"][MERGED] == "qkv_proj"
    assert nodes["layers.mlp.gate_proj"][MERGED] == "gate_up_proj"
    assert nodes["layers.o_proj"][MERGED] == "" and nodes["layers.mlp.down_proj"][MERGED] == ""
    declared = set(projection_groups(nodes.items()).values())
    imported = {n: {k: v for k, v in d.items() if k != MERGED} for n, d in nodes.items()}
    assert set(projection_groups(imported.items()).values()) == declared  # by the names instead
    alone = {**nodes, "layers.k_proj": {**nodes["layers.k_proj"], MERGED: ""}}  # the block says alone
    assert ("layers.q_proj", "layers.v_proj") in set(projection_groups(alone.items()).values())


def test_fused_row_sums_the_widths():
    row, shares = fused_row([{"m": 8, "n": 4096, "k": 4096}, {"m": 8, "n": 1024, "k": 4096}])
    assert row == {"m": 8, "n": 5120.0, "k": 4096} and shares == [0.8, 0.2]
    assert fused_row([{"m": 1, "elements": 4}]) == ({"m": 1, "elements": 4}, [1.0])


def test_small_kernels_follow_each_engine():
    g = compiled_step(resolve_model("llama-3.1-8b"), H100, "decode", tp=1).graph
    vllm = set(small_kernel_groups(g.nodes(data=True), "vllm").values())
    # fused_add_rms_norm (the residual inside the norm), one rotary_embedding for q and k, one
    # reshape_and_cache_flash for k and v, silu_and_mul, the embedding gather
    assert vllm == {
        ("layers.attn_norm",),
        ("layers.mlp_norm",),
        ("head.final_norm",),
        ("layers.rope_q", "layers.rope_k"),
        ("layers.k_cache_write", "layers.v_cache_write"),
        ("layers.mlp.act",),
        ("embed.embed_tokens",),
    }
    trt = set(small_kernel_groups(g.nodes(data=True), "trtllm").values())
    # TensorRT-LLM's attention op rotates and appends the KV itself
    assert trt == vllm - {
        ("layers.rope_q", "layers.rope_k"),
        ("layers.k_cache_write", "layers.v_cache_write"),
    }


def test_small_kernel_times_by_hand():
    # two members of one kernel repeated 32 times, floor 1.5 us: the 48 us split 3:1 by bound
    t = small_kernel_times(np.array([[3e-6], [1e-6]]), np.array([32.0]), 1.5e-6)
    assert t[:, 0] == pytest.approx([36e-6, 12e-6])
    # a bound above its share stays; zero bounds split evenly
    assert small_kernel_times(np.array([[60e-6], [1e-6]]), np.array([32.0]), 1.5e-6)[0, 0] == 60e-6
    assert small_kernel_times(np.zeros((2, 1)), np.array([1.0]), 2e-6)[:, 0] == pytest.approx([1e-6, 1e-6])


def test_fp8_scales_are_checked():
    with pytest.raises(CostModelError, match="fp8_scales 'per-row' not allowed; allowed: dynamic, static"):
        Predictor.of("trtllm", fp8_scales="per-row")
    with pytest.raises(CostModelError, match="the bound predictor prices no measured kernel"):
        Predictor(fp8_scales="static")
    assert "static FP8 activation scales" in Predictor.of("trtllm", fp8_scales="static").label


def test_fp8_scales_without_a_predictor_is_refused(capsys):
    from graphs.cli import main

    args = ["decode", "llama-3.1-8b", "--device", "h100", "--batch", "8", "--ctx", "512"]
    assert main([*args, "--fp8-scales", "static"]) == 2
    assert "--fp8-scales static prices measured FP8 kernels: add --predict" in capsys.readouterr().err


# ------------------------------------------------------------------ the measured corpus


@pytest.fixture(scope="module")
def corpus() -> None:
    pytest.importorskip("pandas", reason="the [measured] extra is not installed")
    pytest.importorskip("aiconfigurator_core", reason="the [measured] extra is not installed")


@pytest.mark.slow
def test_compute_scale_matches_the_wheels_static_fp8_gemms(corpus):
    from costmodel.measured.corpus import compute_scale_s

    # aiconfigurator-core 0.12.0, h100_sxm trtllm 1.3.0rc20, n = k = 4096: fp8 - fp8_static (us)
    wheel = {1: 18.49 - 11.30, 256: 21.83 - 13.68, 8192: 282.01 - 224.75}
    ours = compute_scale_s("h100-sxm", "trtllm", np.array(list(wheel)), np.full(len(wheel), 4096))
    assert ours * 1e6 == pytest.approx(list(wheel.values()), abs=0.02)
    # vLLM's dynamic per-token quantisation costs little over its static one; SGLang's table is zero
    assert compute_scale_s("h100-sxm", "vllm", 1, 4096) * 1e6 == pytest.approx(0.61, abs=0.02)
    assert compute_scale_s("h100-sxm", "sglang", 1, 4096) == 0


def test_static_scales_without_a_compute_scale_table_are_refused(corpus, monkeypatch):
    """No compute_scale table on any device: a static-scale price would silently be the dynamic
    one, so it is refused, naming the way out."""
    from costmodel.measured import corpus as corpus_mod

    monkeypatch.setattr(corpus_mod, "_compute_scale_grid", lambda system, framework: None)
    with pytest.raises(corpus_mod.MeasuredDataError, match=r"no trtllm compute_scale .*--fp8-scales dynamic"):
        corpus_mod.compute_scale_s("h100-sxm", "trtllm", 1, 4096)


@pytest.mark.slow
def test_static_scales_drop_the_scale_and_never_go_below_the_bound(corpus):
    from costmodel.measured.corpus import compute_scale_s
    from costmodel.measured.efficiency import features
    from graphs.serving.pricing.predict import kernel_source, price_rows

    src = kernel_source(H100.name, "trtllm", "gemm", "fp8")
    rows = [
        {"m": m, "n": n, "k": k, "dtype": "fp8"}
        for m in (1, 64, 4096)
        for n, k in ((4096, 4096), (512, 8192))
    ]
    dyn = price_rows(H100, "trtllm", "gemm", src, rows)
    sta = price_rows(H100, "trtllm", "gemm", src, rows, fp8_scales="static")
    import pandas as pd

    bound = features("gemm", pd.DataFrame(rows), H100).bound_s
    scale = compute_scale_s(H100.name, "trtllm", [r["m"] for r in rows], [r["k"] for r in rows])
    for d, s in zip(dyn, sta, strict=True):
        assert np.allclose(s, np.maximum(d - scale, bound))
        assert np.all(s <= d) and np.all(s >= bound)
    bf16 = kernel_source(H100.name, "trtllm", "gemm", "bfloat16")
    rows16 = [{**r, "dtype": "bfloat16"} for r in rows]
    a = price_rows(H100, "trtllm", "gemm", bf16, rows16)
    b = price_rows(H100, "trtllm", "gemm", bf16, rows16, fp8_scales="static")
    assert np.array_equal(a[1], b[1])  # only FP8 GEMMs have an activation scale


@pytest.mark.slow
def test_decode_prices_qkv_as_one_gemm(corpus):
    from graphs.serving.pricing.predict import kernel_source, predict_step, price_rows

    cfg = resolve_model("llama-3.1-8b")
    fused = predict_step(cfg, H100, "decode", batch=16, ctx=1024, framework="vllm")
    apart = predict_step(cfg, H100, "decode", batch=16, ctx=1024, framework="vllm", fuse_projections=False)
    src = kernel_source(H100.name, "vllm", "gemm", "bfloat16")
    one = price_rows(
        H100, "vllm", "gemm", src, [{"m": 16, "n": 4096 + 2 * 1024, "k": 4096, "dtype": "bfloat16"}]
    )
    qkv = [fused.nodes[f"layers.{p}_proj"]["corrected_s"] for p in "qkv"]
    assert sum(qkv) == pytest.approx(float(one[1][0]) * 32, rel=1e-9)  # 32 layers
    assert qkv[1] / qkv[0] == pytest.approx(1024 / 4096)  # split by width
    assert fused.nodes["layers.k_proj"]["fused_with"] == ["layers.q_proj", "layers.v_proj"]
    assert "fused_with" not in fused.nodes["layers.o_proj"]
    # a small projection priced apart pays a whole kernel's fixed cost
    assert fused.corrected_s < apart.corrected_s
    assert fused.bound_s == apart.bound_s


@pytest.mark.slow
def test_the_simulator_prices_the_same_fused_and_static_kernels(corpus):
    from graphs.serving.pricing.predict import predict_step
    from graphs.serving.pricing.priced import priced_step

    cfg = resolve_model("llama-3.1-8b").replace(dtype="fp8", matmul_dtype="fp8", kv_dtype="fp8")
    pred = Predictor.of("trtllm", fp8_scales="static")
    step = priced_step(cfg, H100, "decode", tp=1, predictor=pred).step(64, 2048)
    exact = predict_step(cfg, H100, "decode", batch=64, ctx=2048, framework="trtllm", fp8_scales="static")
    assert step == pytest.approx(exact.corrected_s, rel=0.01)
    dynamic = predict_step(cfg, H100, "decode", batch=64, ctx=2048, framework="trtllm")
    # 32 layers x 4 FP8 GEMMs (qkv, o, gate_up, down) each drop about 7.5 us of scale computation
    assert dynamic.corrected_s - exact.corrected_s == pytest.approx(32 * 4 * 7.5e-6, rel=0.1)


@pytest.mark.slow
def test_small_kernels_cost_the_shortest_measured_kernel(corpus):
    from costmodel.measured.corpus import small_kernel_s
    from graphs.serving.pricing.predict import predict_step

    # the wheel's h100_sxm/quantize/trtllm/1.3.0rc20 scale_matrix rows (m <= 8, k <= 8192): 1.40 us
    floor = small_kernel_s("h100-sxm")
    assert floor == pytest.approx(1.40e-6, abs=0.01e-6)
    p = predict_step(resolve_model("llama-3.1-8b"), H100, "decode", batch=1, ctx=512, framework="vllm")
    n = p.nodes
    assert n["layers.attn_norm"]["corrected_s"] == pytest.approx(32 * floor)
    assert n["layers.rope_q"]["corrected_s"] + n["layers.rope_k"]["corrected_s"] == pytest.approx(32 * floor)
    assert n["layers.attn_residual"]["source"] == "bound"  # inside the next norm
    assert p.corrected_coverage.neighbour_s == pytest.approx(
        sum(v["corrected_s"] for v in n.values() if v["source"] == "neighbour")
    )
    off = predict_step(
        resolve_model("llama-3.1-8b"), H100, "decode", batch=1, ctx=512, framework="vllm", small_kernels=False
    )
    # 32 layers x 5 kernels + the embedding and the final norm, each 1.4 us, over their bounds
    assert p.corrected_s - off.corrected_s == pytest.approx((32 * 5 + 2) * floor, rel=0.02)


@pytest.mark.slow
def test_an_unmeasured_dtype_with_a_roof_keeps_its_bound_in_the_tables(corpus):
    """A GEMM dtype the corpus has no kernels of (NVFP4 on an H100 given an FP4 roof, as a
    --hw-file could): the tables leave the fused projections at their bound, as predict_step does
    (a regression: that branch read the fused kernel's member list as a node index)."""
    import dataclasses

    from costmodel.hardware.spec import Roof
    from graphs.serving.pricing.predict import predict_step
    from graphs.serving.pricing.priced import priced_step

    fp8 = next(r for r in H100.roofs if r.unit == "tensor" and r.precision == "fp8")
    hw = dataclasses.replace(H100, roofs=(*H100.roofs, Roof("tensor", "fp4", 2 * fp8.peak_flops_per_s)))
    cfg = resolve_model("llama-3.1-8b").replace(dtype="nvfp4", matmul_dtype="nvfp4")
    step = priced_step(cfg, hw, "decode", predictor=Predictor.of("vllm")).step(8, 1024)
    exact = predict_step(cfg, hw, "decode", batch=8, ctx=1024, framework="vllm")
    assert exact.nodes["layers.q_proj"]["source"] == "bound"
    assert step == pytest.approx(exact.corrected_s, rel=0.01)


def test_a_clamped_kernel_rests_on_its_bound():
    """A kernel whose prediction fell below its bound is priced at the bound and counted there
    (CLAMPED), for the quantity where it was clamped only: 3 s measured, 2 s clamped."""
    from graphs.serving.pricing.kernel_sources import CLAMPED, coverage_of

    nodes = {
        "a": {"predicted_s": 3.0, "corrected_s": 3.0, "source": "measured", "basis": ""},
        "b": {
            "predicted_s": 2.0,
            "corrected_s": 2.5,
            "source": "measured",
            "basis": "",
            "clamped": ["predicted_s"],
        },
    }
    fits = coverage_of(nodes, "predicted_s")
    assert (fits.measured_s, fits.bound_s, fits.bounds) == (3.0, 2.0, {CLAMPED: 2.0})
    grey = coverage_of(nodes, "corrected_s")
    assert (grey.measured_s, grey.bound_s) == (5.5, 0.0)


@pytest.mark.slow
def test_decode_and_the_tables_say_the_same_of_a_clamped_all_reduce(corpus):
    # DeepSeek-V3 FP8 on 8 H200s at batch 64: the all-reduces' predictions fall below their
    # bound; predict_step and the simulator's priced step both count them as the bound, clamped
    from graphs.serving.pricing.kernel_sources import CLAMPED
    from graphs.serving.pricing.predict import predict_step
    from graphs.serving.pricing.priced import priced_step

    h200 = get_device("h200")
    cfg = resolve_model("deepseek-v3").replace(dtype="fp8")
    p = predict_step(cfg, h200, "decode", batch=64, ctx=4096, tp=8, framework="vllm")
    ar = [v for v in p.nodes.values() if v["family"] == "all_reduce"]
    assert ar and all("corrected_s" in v.get("clamped", ()) for v in ar)
    assert p.corrected_coverage.bounds[CLAMPED] >= sum(v["corrected_s"] for v in ar) * (1 - 1e-12)
    step = priced_step(cfg, h200, "decode", tp=8, predictor=Predictor.of("vllm"))
    cov = step.coverage_array(64, 4096)
    assert cov.bounds[CLAMPED] == pytest.approx(p.corrected_coverage.bounds[CLAMPED], rel=0.05)


def test_coverage_minus_is_reason_by_reason_and_never_negative():
    # MTP's module: the full step's seconds less the plain step's, per reason
    from graphs.serving.pricing.kernel_sources import Coverage

    full = Coverage(5.0, 1.0, 3.0, {"small": 1.0}, {"a": 2.0, "b": 1.0})
    plain = Coverage(4.0, 1.0, 2.5, {"small": 1.0}, {"a": 1.5, "b": 1.0})
    d = full.minus(plain)
    assert (d.measured_s, d.neighbour_s, d.bound_s, d.neighbours, d.bounds) == (1.0, 0.0, 0.5, {}, {"a": 0.5})
    assert plain.minus(full).total_s == 0.0


@pytest.mark.slow
def test_small_ops_at_their_bound_rest_on_it_in_both_paths(corpus):
    # a 4096-token prefill: the norms' bounds exceed the small-kernel floor, so they cost their
    # bound; predict_step and the simulator's priced step both say "ops without measured kernels"
    from graphs.serving.pricing.predict import predict_step
    from graphs.serving.pricing.priced import priced_step

    cfg = resolve_model("llama-3.1-8b")
    p = predict_step(cfg, H100, "prefill", batch=1, seq=4096, framework="vllm").corrected_coverage
    c = priced_step(cfg, H100, "prefill", predictor=Predictor.of("vllm")).coverage_array(1, 4096)
    why = "ops without measured kernels (norms, RoPE, activations, embedding, sampling)"
    assert p.bounds[why] > 0 and c.bounds[why] == pytest.approx(p.bounds[why], rel=1e-6)
    assert c.bounds.keys() == p.bounds.keys()
